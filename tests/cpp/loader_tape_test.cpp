// The loader reads kernels (KDP, UKD) from a tape of the file text, every
// other type from the Json built from the same tape. A kernel must read from
// the tape as from that Json: the same diagnostics (code, file, JSON path,
// message, in order) and the same model. A `//` comment before the document
// changes nothing, so each case loads twice (with and without it) and the two
// sets are compared. Also: the threads reading files do not change the result.
#include <gtest/gtest.h>

#include "json/json_tape.hpp"
#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"

using ukdpack::DescriptorSet;
using ukdpack::LoaderOptions;
using ukdtest::dump;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

// A packed (shard) kernel; `launches` empty: a single-launch one.
Json packedSource(const std::string& symbol) {
  return {{"kind", "kpack"},
          {"library", "../kpack/k.kpack"},
          {"toc_key", "unit000_abc"},
          {"symbol", symbol},
          {"sha256", std::string(64, 'a')},
          {"signature", Json::array({{{"kind", "global_buffer"}, {"size", 8}, {"offset", 0}},
                                     {{"kind", "by_value"}, {"size", 4}, {"offset", 8}, {"name", "n"}}})}};
}

Json packedKernel(const std::string& id, const std::string& name, const std::vector<std::string>& launches = {}) {
  Json k = {{"id", id},
            {"version", launches.empty() ? "1.0" : "1.1"},
            {"name", name},
            {"priority", 3},
            {"metadata", {{"dtype", name}}}};
  if (launches.empty()) {
    k["kernel_source"] = packedSource(name);
  } else {
    for (const std::string& l : launches) k["sources"][l] = packedSource(l);
  }
  return k;
}

std::string render(const DescriptorSet& set) {
  std::string out = dump(set.diagnostics) + "\n";
  for (const ukdpack::Pack& p : set.packs) {
    out += "pack " + p.id + " raw " + p.raw.dump() + "\n";
    for (const ukdpack::PackMember& m : p.members) {
      const ukdpack::Kernel& k = m.kernel();
      out += " kernel " + k.id + " " + k.name + " " + k.version.str() + " p" + std::to_string(k.priority) + " md " +
             k.metadata.dump() + " completed " + m.completedMetadata().dump() + " prov " + k.provenance.dump() +
             " raw " + m.raw().json().dump() + "\n";
      ukdpack::allLaunchSources(k, [&](const ukdpack::KernelSource& s) {
        out += "  source " + s.kind + " " + s.fields.json().dump() + " " + s.symbol + " " +
               ukdpack::describeSignature(s.signature) + "\n";
        return true;
      });
    }
  }
  return out;
}

// Loads `kdpText` as a.kdp.json beside the generic descriptors, as written
// and behind a comment, and expects the same rendering.
std::string loadBothWays(const std::string& kdpText, const LoaderOptions& options = {}) {
  TempTree tape;
  TempTree dom;
  for (TempTree* t : {&tape, &dom}) {
    ukdtest::writeGenerics(*t);
    t->write("eng.kmd.json",
             Json{{"id", "kmd-1"},
                  {"version", "1.0"},
                  {"name", "md"},
                  {"fields", Json::array({{{"name", "dtype"}, {"type", "string"}},
                                          {{"name", "tile"}, {"type", "int"}, {"default_value", 4}}})}});
  }
  tape.write("a.kdp.json", kdpText);
  dom.write("a.kdp.json", "// a comment changes nothing\n" + kdpText);
  const std::string viaTape = render(ukdpack::loadShard(tape.root(), options));
  const std::string viaDom = render(ukdpack::loadShard(dom.root(), options));
  EXPECT_EQ(viaTape, viaDom) << kdpText;
  return viaTape;
}

Json pack(const Json& kernels) { return ukdtest::kdp("kdp-a", kernels); }

}  // namespace

TEST(LoaderTape, ScanReadsAsTheOneReader) {
  using ukdpack::detail::JsonTape;
  const auto scan = [](const std::string& text) { return JsonTape::scan(std::make_shared<const std::string>(text)); };
  const std::string doc = R"({"b": [1, -2, 3.5, true, null, {"z": "x", "a": []}], "a": {"k": "v"}, "n": -0})";
  const auto tape = scan(doc);
  ASSERT_TRUE(tape);
  EXPECT_EQ(tape->root().toJson(), Json::parse(doc));
  EXPECT_EQ(tape->root().toJson().dump(), Json::parse(doc).dump());
  // Members iterate in key order, as a Json object's; values keep their bytes.
  std::string keys;
  for (auto it = tape->root().begin(); it != tape->root().end(); ++it) keys += std::string(it.key());
  EXPECT_EQ(keys, "abn");
  const auto b = tape->root().find("b");
  ASSERT_NE(b, tape->root().end());
  EXPECT_EQ(ukdpack::detail::textOf(*b).text(), R"([1, -2, 3.5, true, null, {"z": "x", "a": []}])");
  EXPECT_TRUE((*b)[0].is_number_unsigned());
  EXPECT_FALSE((*b)[1].is_number_unsigned());
  EXPECT_EQ((*b)[1].get<std::int64_t>(), -2);
  // Refused (json_tape_test.cpp says how each is worded).
  for (const std::string& text : std::vector<std::string>{
           R"({"a": 1, "a": 2})", R"({"a": 9223372036854775808})", R"({"a": -9223372036854775809})", R"({"a": 1e999})",
           R"({"a": 01})", R"({"a": 1.})", R"({"a": tru})", "{\"a\": \"x\ty\"}", "{} x", "", "{",
           std::string(129, '[') + std::string(129, ']'), R"({"a": "\x"})", R"({"a": "\u12"})", R"({"a": "\ud800"})",
           R"({"a": "\udc00\ud800"})", R"({"a": "\ud800\u0041"})", R"({"a": 1, "\u0061": 2})", "{\"a\": \"\\\n\"}"}) {
    EXPECT_FALSE(scan(text)) << text;
  }
  EXPECT_TRUE(scan(std::string(128, '[') + std::string(128, ']')));
  // Escapes are decoded as the one reader decodes them, keys too (and ordered by
  // their decoded bytes); the value keeps the bytes it was written as.
  for (const std::string text : {R"({"a": "\n\t\"\\\/\b\f\r", "b": "\u00e9\u20AC\ud83d\ude00\u0000x"})",
                                 R"({"\u007a": 1, "y\u00e9": [2, "\u0041"], "x": {"\"": null}})"}) {
    const auto escaped = scan(text);
    ASSERT_TRUE(escaped) << text;
    EXPECT_EQ(escaped->root().toJson(), Json::parse(text)) << text;
    EXPECT_EQ(escaped->root().toJson().dump(), Json::parse(text).dump()) << text;
    EXPECT_EQ(ukdpack::detail::textOf(escaped->root()).text(), text);
  }
  EXPECT_TRUE(scan(R"({"a": -9223372036854775808, "b": 9223372036854775807})"));
}

TEST(LoaderTape, ValidPackReadsAsTheDomReadsIt) {
  Json a = packedKernel("ukd-a", "a");
  a["x-tuning"] = {{"tile", 4}, {"list", {1, -2, 3.5}}};
  a["provenance"] = {{"tool", "t"}};
  a["metadata"]["tile"] = 8;
  Json doc = pack(Json::array({a, packedKernel("ukd-b", "b", {"produce", "consume"})}));
  doc["_comment"] = "carried";
  const std::string out = loadBothWays(doc.dump());
  EXPECT_NE(out.find("kernel ukd-a a 1.0 p3"), std::string::npos) << out;
  EXPECT_NE(out.find("\"x-tuning\":{\"list\":[1,-2,3.5],\"tile\":4}"), std::string::npos) << out;
  EXPECT_NE(out.find("kernel ukd-b b 1.1"), std::string::npos) << out;
  // Pretty-printed text reads alike too (views keep the bytes; json() reads them).
  loadBothWays(doc.dump(2));
}

TEST(LoaderTape, EveryRefusalIsWordedAsTheDomWordsIt) {
  Json k = packedKernel("ukd-a", "a");
  k["zeta"] = 1;  // unknown keys: refused in key order
  k["alpha"] = true;
  k["priority"] = 1.5;
  k["kernel_source"]["signature"][0]["size"] = -8;
  k["kernel_source"]["signature"][1]["offset"] = "eight";
  k["kernel_source"]["signature"][1]["extra"] = nullptr;
  k["kernel_source"]["sha256"] = "ABC";
  k["kernel_source"]["role"] = "main";
  Json m = packedKernel("ukd-b", "b", {"produce", "9bad"});
  m["sources"]["produce"]["kind"] = "hip";
  m["arch"] = {"gfx90a", "gfx90a", "not an arch"};
  Json newer = packedKernel("ukd-c", "c");
  newer["version"] = "1.9";
  Json noVersion = packedKernel("ukd-d", "d");
  noVersion.erase("version");
  Json doc = pack(Json::array({k, m, newer, noVersion, 42, "", "ukd-missing"}));
  doc["matchers"] = {"umd-1", 7};
  doc["bogus"] = {{"nested", Json::array()}};
  const std::string out = loadBothWays(doc.dump());
  EXPECT_NE(out.find("unknown key 'alpha'"), std::string::npos) << out;
  EXPECT_LT(out.find("unknown key 'alpha'"), out.find("unknown key 'zeta'")) << out;
  EXPECT_NE(out.find("expected integer, found number 1.5"), std::string::npos) << out;
  EXPECT_NE(out.find("expected a size >= 0, found -8"), std::string::npos) << out;
  EXPECT_NE(out.find("expected integer, found 'eight'"), std::string::npos) << out;
  EXPECT_NE(out.find("VERSION_SKIPPED"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown key 'bogus'"), std::string::npos) << out;
}

TEST(LoaderTape, OddDocumentsAndRefusalsReadAlike) {
  // Big or odd numbers, duplicate keys, deep nesting, a non-object; escapes (the
  // tape decodes them; a malformed one is a syntax error, below).
  Json k = packedKernel("ukd-a", "a\"quoted\" \u00e9");
  k["metadata"]["tile"] = 9223372036854775807LL;
  loadBothWays(pack(Json::array({k})).dump());
  loadBothWays(pack(Json::array({packedKernel("ukd-a", "a")})).dump(-1, ' ', true));
  const std::string plain = pack(Json::array({packedKernel("ukd-a", "a")})).dump();
  loadBothWays(plain.substr(0, plain.size() - 1) + ", \"priority\": 1}");        // a duplicate key at $
  loadBothWays(plain.substr(0, plain.size() - 1) + ", \"\\u0070riority\": 1}");  // the same, escaped
  loadBothWays(plain.substr(0, plain.size() - 1) + ", \"x-\\u00e9\": \"\\ud83d\\ude00\", \"\\u007a\": 1}");
  loadBothWays("[1, 2]");
  loadBothWays("{\"id\": 18446744073709551615}");
  loadBothWays("{\"id\": 1e999}");
  loadBothWays("{\"id\": -0, \"version\": \"1.0\", \"x\": 1.0e2}");
  loadBothWays(std::string(200, '[') + std::string(200, ']'));
  // Syntax errors name a line (the comment would move it): the loader says what the one reader says.
  for (const std::string text : {"{\"id\": \"kdp-a\",}", "", "{\"id\": 01}", "{\"id\": \"a\tb\"}",
                                 "{\"id\": \"\\ud800\"}", "{\"id\": \"\\q\"}"}) {
    TempTree t;
    t.write("a.kdp.json", text);
    const DescriptorSet set = ukdpack::loadShard(t.root());
    const auto expected = ukdpack::parseDescriptorText(text);
    ASSERT_FALSE(expected) << text;
    ASSERT_EQ(set.diagnostics.size(), 1u) << dump(set.diagnostics);
    EXPECT_EQ(set.diagnostics[0].code, expected.error().code);
    EXPECT_EQ(set.diagnostics[0].message, expected.error().message);
    EXPECT_EQ(set.diagnostics[0].file, "a.kdp.json");
  }
}

// A pack written with a BOM and comments, inside a kernel's object too, loads
// from the tape, and the kernel's raw value (a view of those bytes) reads again.
TEST(LoaderTape, CommentsInsideAKernelStayReadable) {
  const std::string plain = pack(Json::array({packedKernel("ukd-a", "a")})).dump(2);
  const std::size_t brace = plain.find('{', plain.find("kernelDescriptors"));
  const std::string text =
      "\xEF\xBB\xBF// a pack\n" + plain.substr(0, brace + 1) + " /* inside */ // and\n" + plain.substr(brace + 1);
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", text);
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const ukdpack::PackMember* m = set.findKernel("ukd-a");
  ASSERT_NE(m, nullptr) << dump(set.diagnostics);
  EXPECT_NE(m->raw().text().find("/* inside */"), std::string_view::npos);
  EXPECT_EQ(m->raw().json(), packedKernel("ukd-a", "a"));
}

TEST(LoaderTape, ThreadsDoNotChangeTheResult) {
  TempTree t;
  ukdtest::writeGenerics(t);
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    Json kernels = Json::array({packedKernel("ukd-" + n, "k" + n)});
    if (i % 7 == 3) kernels[0]["oops"] = i;  // some files carry errors
    if (i % 11 == 5) kernels.push_back(packedKernel("ukd-" + std::to_string(i - 1), "dup" + n));
    t.write("d" + std::to_string(i % 4) + "/p" + n + ".kdp.json", ukdtest::kdp("kdp-" + n, kernels).dump());
  }
  t.write("d1/broken.kdp.json", std::string("{\"id\": "));
  LoaderOptions one;
  one.threads = 1;
  LoaderOptions many;
  many.threads = 4;
  const DescriptorSet a = ukdpack::loadShard(t.root(), one);
  const DescriptorSet b = ukdpack::loadShard(t.root(), many);
  EXPECT_FALSE(a.diagnostics.empty());
  EXPECT_EQ(dump(a.diagnostics), dump(b.diagnostics));
  EXPECT_EQ(render(a), render(b));
  ASSERT_EQ(a.files.size(), b.files.size());
  for (std::size_t i = 0; i < a.files.size(); ++i) EXPECT_EQ(a.files[i].rel, b.files[i].rel);
}
