#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/json/json_spans.hpp"

using ukdpack::JsonSpan;

namespace {

std::vector<JsonSpan> spansOf(std::string_view text) {
  auto r = ukdpack::jsonSpans(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? r.value() : std::vector<JsonSpan>{};
}

const JsonSpan* find(const std::vector<JsonSpan>& spans, const std::string& path) {
  for (const JsonSpan& s : spans)
    if (s.path == path) return &s;
  return nullptr;
}

std::string_view slice(std::string_view text, std::size_t b, std::size_t e) { return text.substr(b, e - b); }

}  // namespace

TEST(JsonSpans, PathsInDocumentOrderWithNesting) {
  const std::string text = R"({"a": {"b": [1, {"c": null}], "odd key": true}, "d": "x"})";
  const auto spans = spansOf(text);
  std::vector<std::string> paths;
  for (const auto& s : spans) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"$", "$.a", "$.a.b", "$.a.b[0]", "$.a.b[1]", "$.a.b[1].c",
                                             "$.a[\"odd key\"]", "$.d"}));
  EXPECT_EQ(slice(text, find(spans, "$.a.b")->begin, find(spans, "$.a.b")->end), "[1, {\"c\": null}]");
  EXPECT_EQ(slice(text, find(spans, "$.a.b[1].c")->begin, find(spans, "$.a.b[1].c")->end), "null");
  EXPECT_EQ(find(spans, "$")->begin, 0u);
  EXPECT_EQ(find(spans, "$")->end, text.size());
  const JsonSpan* d = find(spans, "$.d");
  EXPECT_TRUE(d->member);
  EXPECT_EQ(slice(text, d->keyBegin, d->keyEnd), "\"d\"");
  EXPECT_TRUE(d->inlineStart);
  EXPECT_FALSE(find(spans, "$.a.b[0]")->member);
}

TEST(JsonSpans, CommentsAndEscapedQuotesAreSteppedOver) {
  const std::string text =
      "// a leading comment { \"not\": 1 }\n"
      "{\n"
      "  \"name\": \"say \\\"hi\\\" /* not a comment */\", // trailing }\n"
      "  /* a block\n     comment \"with quotes\" ] */\n"
      "  \"arch\": [\"gfx90a\" /* x */, \"gfx940\"],\n"
      "\t\"q\\\"k\": 12/*c*/\n"
      "}\n";
  const auto spans = spansOf(text);
  ASSERT_EQ(spans.size(), 6u);
  const JsonSpan* name = find(spans, "$.name");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(slice(text, name->begin, name->end), "\"say \\\"hi\\\" /* not a comment */\"");
  EXPECT_EQ(name->indent, "  ");
  EXPECT_FALSE(name->inlineStart);
  const JsonSpan* arch = find(spans, "$.arch");
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(slice(text, arch->keyBegin, arch->keyEnd), "\"arch\"");
  EXPECT_EQ(slice(text, arch->begin, arch->end), "[\"gfx90a\" /* x */, \"gfx940\"]");
  EXPECT_EQ(slice(text, find(spans, "$.arch[1]")->begin, find(spans, "$.arch[1]")->end), "\"gfx940\"");
  const JsonSpan* q = find(spans, "$[\"q\\\"k\"]");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(slice(text, q->begin, q->end), "12");
  EXPECT_EQ(q->indent, "\t");
}

TEST(JsonSpans, ByteOffsetsCountUtf8AndTheBom) {
  const std::string text = "\xEF\xBB\xBF{\"\xC3\xA9t\xC3\xA9\": \"\xE2\x82\xAC\"}";
  const auto spans = spansOf(text);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].begin, 3u);
  EXPECT_EQ(spans[1].path, "$[\"\xC3\xA9t\xC3\xA9\"]");
  EXPECT_EQ(slice(text, spans[1].begin, spans[1].end), "\"\xE2\x82\xAC\"");
}

TEST(JsonSpans, WhatTheReaderRefusesIsRefusedWithItsDiagnostic) {
  auto dup = ukdpack::jsonSpans(R"({"a": 1, "a": 2})");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, "DUPLICATE_KEY");
  auto broken = ukdpack::jsonSpans("{\"a\": [1, }");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code, "JSON_SYNTAX");
}

// The reader ends a `//` comment at a lone CR too: the next value is no part of it
// (it was, for a scanner of its own, and a migrate insert landed in another kernel).
TEST(JsonSpans, ALoneCrEndsALineCommentAsTheReaderSays) {
  const std::string text = "{\"k\": [1, // one\r 2, 3],\r\t\"z\": 4}";
  const auto spans = spansOf(text);
  std::vector<std::string> paths;
  for (const auto& s : spans) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"$", "$.k", "$.k[0]", "$.k[1]", "$.k[2]", "$.z"}));
  EXPECT_EQ(slice(text, find(spans, "$.k[1]")->begin, find(spans, "$.k[1]")->end), "2");
  EXPECT_EQ(find(spans, "$.z")->indent, "\t");  // a CR starts a line
  EXPECT_FALSE(find(spans, "$.z")->inlineStart);
}
