// KpackArchive on archives assembled here byte by byte from the format (a small
// msgpack encoder of our own, so the reader is not tested against itself), plus
// every truncation, byte flips and targeted corruptions.
#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ukdpack/archive/kpack.hpp"

using ukdpack::KpackArchive;
using ukdpack::KpackLimits;

namespace {

// msgpack, by hand: only the shapes these tests need.
struct Mp {
  std::string out;
  Mp& raw(const std::string& b) { return out += b, *this; }
  Mp& be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out += char((v >> (8 * i)) & 0xff);
    return *this;
  }
  Mp& map(std::size_t n) { return n < 16 ? raw(std::string(1, char(0x80 | n))) : raw("\xde").be(n, 2); }
  Mp& arr(std::size_t n) { return n < 16 ? raw(std::string(1, char(0x90 | n))) : raw("\xdc").be(n, 2); }
  Mp& str(const std::string& s) {
    if (s.size() < 32)
      out += char(0xa0 | s.size());
    else
      raw("\xd9").be(s.size(), 1);
    return raw(s);
  }
  Mp& uint(std::uint64_t v) {
    if (v < 128) return raw(std::string(1, char(v)));
    if (v <= 0xffff) return raw("\xcd").be(v, 2);
    if (v <= 0xffffffffull) return raw("\xce").be(v, 4);
    return raw("\xcf").be(v, 8);
  }
};

std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += char((v >> (8 * i)) & 0xff);
  return s;
}

std::string header(std::uint64_t tocOffset, std::uint32_t version = 1) {
  return "KPAK" + le(version, 4) + le(tocOffset, 8) + std::string(48, '\0');
}

// One zstd frame of "hi" by hand: magic, descriptor 0x20 (single segment, 1-byte
// content size), size 2, one raw last block of 2 bytes.
const std::string kFrameHi = std::string("\x28\xb5\x2f\xfd\x20\x02\x11\x00\x00", 9) + "hi";

std::string zstdFrame(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

struct Item {
  std::string key, arch, data;
  std::string metadata;  // msgpack of the metadata map, or empty
};

// An archive as the writer lays it out; `tweak` may edit the TOC map's
// tail (extra fields written after the standard ones).
std::string build(const std::vector<Item>& items, const std::string& scheme,
                  const std::vector<std::string>& arches = {"gfx90a"}) {
  std::string data;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blobs;
  if (scheme == "zstd-per-kernel") {
    data = le(items.size(), 4);
    for (const Item& it : items) {
      const std::string f = it.data == "hi" ? kFrameHi : zstdFrame(it.data);
      data += le(f.size(), 4) + f;
    }
  } else {
    for (const Item& it : items) {
      blobs.emplace_back(64 + data.size(), it.data.size());
      data += it.data;
    }
  }
  Mp toc;
  toc.map(scheme == "zstd-per-kernel" ? 8 : 7);
  toc.str("format_version").uint(1).str("group_name").str("g").str("gfx_arch_family");
  toc.str(arches.size() == 1 ? arches[0] : "fam").str("gfx_arches").arr(arches.size());
  for (const auto& a : arches) toc.str(a);
  // Group items by key, keeping first-seen order.
  std::vector<std::string> keys;
  for (const Item& it : items)
    if (std::find(keys.begin(), keys.end(), it.key) == keys.end()) keys.push_back(it.key);
  toc.str("toc").map(keys.size());
  for (const auto& k : keys) {
    std::size_t n = 0;
    for (const Item& it : items) n += it.key == k;
    toc.str(k).map(n);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      if (it.key != k) continue;
      toc.str(it.arch).map(it.metadata.empty() ? 3 : 4);
      toc.str("type").str("hsaco").str("ordinal").uint(i).str("original_size").uint(it.data.size());
      if (!it.metadata.empty()) toc.str("metadata").raw(it.metadata);
    }
  }
  toc.str("compression_scheme").str(scheme);
  if (scheme == "zstd-per-kernel") {
    toc.str("zstd_offset").uint(64).str("zstd_size").uint(data.size());
  } else {
    toc.str("blobs").arr(blobs.size());
    for (const auto& [o, s] : blobs) toc.map(2).str("offset").uint(o).str("size").uint(s);
  }
  return header(64 + data.size()) + data + toc.out;
}

std::string bytesOf(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }

const std::vector<Item> kSmall = {
    {"alpha", "gfx90a", std::string(50, 'A'), Mp().map(1).str("n").uint(1).out},
    {"alpha", "gfx1030", std::string(30, 'B'), ""},
    {"beta", "gfx90a", "", ""},
};

}  // namespace

TEST(Kpack, GoldenZstdArchiveSpelledOutFromTheSpec) {
  // Byte for byte what the Python writer's golden test expects too.
  const std::string blob = le(1, 4) + le(kFrameHi.size(), 4) + kFrameHi;
  Mp toc;
  toc.map(8).str("format_version").uint(1).str("group_name").str("g");
  toc.str("gfx_arch_family").str("gfx90a").str("gfx_arches").arr(1).str("gfx90a");
  toc.str("toc").map(1).str("k").map(1).str("gfx90a").map(3);
  toc.str("type").str("hsaco").str("ordinal").uint(0).str("original_size").uint(2);
  toc.str("compression_scheme").str("zstd-per-kernel").str("zstd_offset").uint(64);
  toc.str("zstd_size").uint(blob.size());
  const std::string bytes = header(64 + blob.size()) + blob + toc.out;
  EXPECT_EQ(bytes, build({{"k", "gfx90a", "hi", ""}}, "zstd-per-kernel"));

  auto r = KpackArchive::fromBytes(bytes);
  ASSERT_TRUE(r) << r.error().str();
  const KpackArchive& a = r.value();
  EXPECT_EQ(a.groupName(), "g");
  EXPECT_EQ(a.archFamily(), "gfx90a");
  EXPECT_EQ(a.arches(), std::vector<std::string>{"gfx90a"});
  EXPECT_EQ(a.compressionScheme(), "zstd-per-kernel");
  EXPECT_EQ(a.keys(), std::vector<std::string>{"k"});
  const ukdpack::KpackEntry* e = a.find("k", "gfx90a");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, "hsaco");
  EXPECT_EQ(e->ordinal, 0u);
  EXPECT_EQ(e->originalSize, 2u);
  EXPECT_TRUE(e->metadata.is_null());
  auto got = a.get("k", "gfx90a");
  ASSERT_TRUE(got) << got.error().str();
  EXPECT_EQ(bytesOf(got.value()), "hi");
}

TEST(Kpack, GoldenNoneArchiveSpelledOutFromTheSpec) {
  Mp toc;
  toc.map(7).str("format_version").uint(1).str("group_name").str("g");
  toc.str("gfx_arch_family").str("gfx90a").str("gfx_arches").arr(1).str("gfx90a");
  toc.str("toc").map(1).str("k").map(1).str("gfx90a").map(3);
  toc.str("type").str("hsaco").str("ordinal").uint(0).str("original_size").uint(2);
  toc.str("compression_scheme").str("none").str("blobs").arr(1).map(2);
  toc.str("offset").uint(64).str("size").uint(2);
  const std::string bytes = header(66) + "hi" + toc.out;
  auto r = KpackArchive::fromBytes(bytes);
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(r.value().compressionScheme(), "none");
  auto got = r.value().get("k", "gfx90a");
  ASSERT_TRUE(got);
  EXPECT_EQ(bytesOf(got.value()), "hi");
}

TEST(Kpack, BothSchemesRoundTripEntriesAndMetadata) {
  for (const std::string scheme : {"zstd-per-kernel", "none"}) {
    auto r = KpackArchive::fromBytes(build(kSmall, scheme, {"gfx90a", "gfx1030"}), "small");
    ASSERT_TRUE(r) << r.error().str();
    const KpackArchive& a = r.value();
    EXPECT_EQ(a.keys(), (std::vector<std::string>{"alpha", "beta"}));
    EXPECT_EQ(a.archFamily(), "fam");
    for (const Item& it : kSmall) {
      auto got = a.get(it.key, it.arch);
      ASSERT_TRUE(got) << got.error().str();
      EXPECT_EQ(bytesOf(got.value()), it.data) << scheme << " " << it.key << " " << it.arch;
    }
    EXPECT_EQ(a.find("alpha", "gfx90a")->metadata, nlohmann::json({{"n", 1}}));
    EXPECT_EQ(a.find("alpha", "gfx1030")->ordinal, 1u);
    EXPECT_EQ(a.find("alpha", "gfx940"), nullptr);
  }
}

TEST(Kpack, MissingEntryNamesKeyArchAndWhatIsHeld) {
  auto r = KpackArchive::fromBytes(build(kSmall, "none", {"gfx90a", "gfx1030"}), "lib.kpack");
  ASSERT_TRUE(r);
  auto miss = r.value().get("alpha", "gfx940");
  ASSERT_FALSE(miss);
  EXPECT_EQ(miss.error().code, "KPACK_NO_ENTRY");
  EXPECT_EQ(miss.error().file, "lib.kpack");
  EXPECT_NE(miss.error().message.find("'alpha' and arch 'gfx940'"), std::string::npos);
  EXPECT_NE(miss.error().message.find("gfx1030, gfx90a"), std::string::npos);
  auto key = r.value().get("gamma", "gfx90a");
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message.find("holds keys: alpha, beta"), std::string::npos);
}

TEST(Kpack, MissingSchemeIsNoneAndOriginalSizeIsOptional) {
  Mp toc;
  toc.map(6).str("format_version").uint(1).str("group_name").str("blas");
  toc.str("gfx_arch_family").str("gfx100X").str("gfx_arches").arr(1).str("gfx1030");
  toc.str("toc").map(1).str("lib/x.so").map(1).str("gfx1030").map(2);
  toc.str("type").str("hsaco").str("ordinal").uint(0);
  toc.str("blobs").arr(1).map(2).str("offset").uint(64).str("size").uint(6);
  auto r = KpackArchive::fromBytes(header(70) + "abcdef" + toc.out);
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(r.value().compressionScheme(), "none");
  EXPECT_EQ(r.value().find("lib/x.so", "gfx1030")->originalSize, 6u);
  EXPECT_EQ(bytesOf(r.value().get("lib/x.so", "gfx1030").value()), "abcdef");
}

TEST(Kpack, EveryTruncationIsRefusedWithAMessage) {
  for (const std::string scheme : {"zstd-per-kernel", "none"}) {
    const std::string full = build(kSmall, scheme, {"gfx90a", "gfx1030"});
    for (std::size_t n = 0; n < full.size(); ++n) {
      auto r = KpackArchive::fromBytes(full.substr(0, n));
      ASSERT_FALSE(r) << scheme << " accepted a truncation to " << n << " bytes";
      EXPECT_FALSE(r.error().message.empty());
      EXPECT_EQ(r.error().severity, ukdpack::Severity::Error);
    }
  }
}

TEST(Kpack, ByteFlipsNeverCrashAndRefusalsCarryAMessage) {
  for (const std::string scheme : {"zstd-per-kernel", "none"}) {
    const std::string full = build(kSmall, scheme, {"gfx90a", "gfx1030"});
    for (std::size_t i = 0; i < full.size(); ++i) {
      for (unsigned mask : {0x01u, 0x80u, 0xffu}) {
        std::string bad = full;
        bad[i] = char(static_cast<unsigned char>(bad[i]) ^ mask);
        auto r = KpackArchive::fromBytes(bad);
        if (!r) {
          EXPECT_FALSE(r.error().message.empty());
          continue;
        }
        for (const Item& it : kSmall) {
          auto got = r.value().get(it.key, it.arch);
          if (!got) {
            EXPECT_FALSE(got.error().message.empty());
          }
        }
      }
    }
  }
}

namespace {
std::string withTocTail(const std::string& scheme, const std::string& tail, std::size_t extra) {
  // The small archive with `extra` more fields appended to its TOC map: a later
  // duplicate key overrides the earlier one, as in Python's reader.
  std::string a = build(kSmall, scheme, {"gfx90a", "gfx1030"});
  std::uint64_t tocOffset = 0;
  for (int i = 7; i >= 0; --i) tocOffset = tocOffset << 8 | static_cast<unsigned char>(a[8 + i]);
  const unsigned char head = static_cast<unsigned char>(a[tocOffset]);
  a[tocOffset] = char(head + extra);  // a fixmap: bump its count
  return a + tail;
}

void expectRefused(const std::string& bytes, const std::string& code, const std::string& fragment,
                   const KpackLimits& limits = {}) {
  auto r = KpackArchive::fromBytes(bytes, "<t>", limits);
  ASSERT_FALSE(r) << "accepted; expected " << fragment;
  EXPECT_EQ(r.error().code, code) << r.error().str();
  EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().str();
}
}  // namespace

TEST(Kpack, HeaderRefusals) {
  const std::string a = build(kSmall, "none", {"gfx90a", "gfx1030"});
  expectRefused("KPAX" + a.substr(4), "KPACK_BAD_HEADER", "not a kpack archive");
  expectRefused(a.substr(0, 4) + le(2, 4) + a.substr(8), "KPACK_VERSION", "format version 2");
  expectRefused(a.substr(0, 8) + le(a.size(), 8) + a.substr(16), "KPACK_OUT_OF_BOUNDS", "TOC offset");
  expectRefused(a.substr(0, 8) + le(~0ull, 8) + a.substr(16), "KPACK_OUT_OF_BOUNDS", "TOC offset");
  expectRefused(a.substr(0, 8) + le(20, 8) + a.substr(16), "KPACK_OUT_OF_BOUNDS", "TOC offset 20");
  expectRefused(a + '\0', "KPACK_BAD_TOC", "1 trailing bytes after the TOC");
  expectRefused(a + "\x80", "KPACK_BAD_TOC", "trailing bytes");
}

TEST(Kpack, TocCorruptionsAreRefusedByName) {
  expectRefused(withTocTail("none", Mp().str("format_version").uint(2).out, 1), "KPACK_VERSION", "format_version is 2");
  expectRefused(withTocTail("none", Mp().str("compression_scheme").str("lz4").out, 1), "KPACK_BAD_TOC",
                "unknown compression scheme 'lz4'");
  expectRefused(withTocTail("zstd-per-kernel", Mp().str("zstd_size").uint(1u << 20).out, 1), "KPACK_OUT_OF_BOUNDS",
                "outside the data region");
  expectRefused(withTocTail("zstd-per-kernel", Mp().str("zstd_offset").uint(8).out, 1), "KPACK_OUT_OF_BOUNDS",
                "outside the data region");
  expectRefused(
      withTocTail("none", Mp().str("blobs").arr(1).map(2).str("offset").uint(1ull << 40).str("size").uint(50).out, 1),
      "KPACK_OUT_OF_BOUNDS", "outside the data region");
  expectRefused(withTocTail("none", Mp().str("blobs").arr(0).out, 1), "KPACK_BAD_TOC", "ordinal 0 is out of range");
  expectRefused(withTocTail("none", Mp().str("toc").arr(0).out, 1), "KPACK_BAD_TOC", "'toc' is not a map");
  expectRefused(withTocTail("none", Mp().str("group_name").uint(3).out, 1), "KPACK_BAD_TOC", "group_name is 3");
  expectRefused(withTocTail("none", Mp().str("gfx_arches").str("gfx90a").out, 1), "KPACK_BAD_TOC", "gfx_arches");
  expectRefused(withTocTail("none",
                            Mp().str("toc")
                                .map(1)
                                .str("k")
                                .map(1)
                                .str("gfx90a")
                                .map(4)
                                .str("type")
                                .str("hsaco")
                                .str("ordinal")
                                .uint(0)
                                .str("original_size")
                                .uint(50)
                                .str("metadata")
                                .raw("\xc4\x01x")
                                .out,
                            1),
                "KPACK_BAD_TOC", "metadata is not a map");
  expectRefused(withTocTail("none",
                            Mp().str("toc")
                                .map(1)
                                .str("k")
                                .map(1)
                                .str("gfx90a")
                                .map(3)
                                .str("type")
                                .str("hsaco")
                                .str("ordinal")
                                .uint(0)
                                .str("original_size")
                                .uint(49)
                                .out,
                            1),
                "KPACK_BAD_TOC", "differs from its blob's 50 bytes");
  expectRefused(withTocTail("none", Mp().str("x").raw("\xa2\xff\xfe").out, 1), "KPACK_BAD_TOC", "not UTF-8");
}

TEST(Kpack, LimitsAreEnforced) {
  const std::string a = build(kSmall, "zstd-per-kernel", {"gfx90a", "gfx1030"});
  KpackLimits small;
  small.maxOriginalSize = 40;
  expectRefused(a, "KPACK_LIMIT", "original_size 50 is over the limit of 40", small);
  KpackLimits toc;
  toc.maxTocSize = 16;
  expectRefused(a, "KPACK_LIMIT", "-byte limit", toc);
  KpackLimits entries;
  entries.maxEntries = 2;
  expectRefused(a, "KPACK_LIMIT", "over the limit of 2", entries);
  expectRefused(withTocTail("zstd-per-kernel",
                            Mp().str("toc")
                                .map(1)
                                .str("k")
                                .map(1)
                                .str("gfx90a")
                                .map(3)
                                .str("type")
                                .str("hsaco")
                                .str("ordinal")
                                .uint(0)
                                .str("original_size")
                                .uint(1ull << 31)
                                .out,
                            1),
                "KPACK_LIMIT", "over the limit");
}

TEST(Kpack, HostileContainerSizesAreRefusedWithoutAllocating) {
  std::string claims = Mp().map(1).str("toc").out;
  for (int i = 0; i < 40; ++i) claims += std::string("\xdd\xff\xff\xff\xff", 5);
  const auto start = std::chrono::steady_clock::now();
  expectRefused(header(64) + claims, "KPACK_BAD_TOC", "more items than bytes remain");
  expectRefused(header(64) + std::string("\xdf\xff\xff\xff\xff", 5), "KPACK_BAD_TOC", "more entries than bytes remain");
  std::string deep;
  for (int i = 0; i < 2000; ++i) deep += "\x91";
  expectRefused(header(64) + deep + "\xc0", "KPACK_BAD_TOC", "nested deeper");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(Kpack, FrameProblemsAreRefusedAtGet) {
  // original_size disagrees with the frame header.
  std::string a = build({{"k", "gfx90a", std::string(100, 'q'), ""}}, "zstd-per-kernel");
  std::string frame = zstdFrame(std::string(100, 'q'));
  std::string blob = le(1, 4) + le(frame.size() + kFrameHi.size(), 4) + frame + kFrameHi;
  Mp toc;
  toc.map(8).str("format_version").uint(1).str("group_name").str("g");
  toc.str("gfx_arch_family").str("gfx90a").str("gfx_arches").arr(1).str("gfx90a");
  toc.str("toc").map(1).str("k").map(1).str("gfx90a").map(3);
  toc.str("type").str("hsaco").str("ordinal").uint(0).str("original_size").uint(100);
  toc.str("compression_scheme").str("zstd-per-kernel").str("zstd_offset").uint(64);
  toc.str("zstd_size").uint(blob.size());
  auto two = KpackArchive::fromBytes(header(64 + blob.size()) + blob + toc.out);
  ASSERT_TRUE(two) << two.error().str();
  auto got = two.value().get("k", "gfx90a");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, "KPACK_BAD_FRAME");
  EXPECT_NE(got.error().message.find("bytes follow the frame"), std::string::npos);

  a[64 + 8] = 'X';  // break the magic of the only frame
  auto bad = KpackArchive::fromBytes(a);
  ASSERT_TRUE(bad);
  auto g2 = bad.value().get("k", "gfx90a");
  ASSERT_FALSE(g2);
  EXPECT_NE(g2.error().message.find("not a zstd frame"), std::string::npos);
}

TEST(Kpack, OpensFilesAndSaysWhyNot) {
  const std::string path = testing::TempDir() + "/ukdpack_kpack_test.kpack";
  {
    std::ofstream f(path, std::ios::binary);
    f << build(kSmall, "zstd-per-kernel", {"gfx90a", "gfx1030"});
  }
  auto r = KpackArchive::open(path);
  ASSERT_TRUE(r) << r.error().str();
  KpackArchive moved = std::move(r).value();  // the archive stays usable after a move
  EXPECT_EQ(moved.path(), path);
  EXPECT_EQ(bytesOf(moved.get("alpha", "gfx1030").value()), std::string(30, 'B'));
  std::remove(path.c_str());
  EXPECT_EQ(bytesOf(moved.get("alpha", "gfx90a").value()), std::string(50, 'A'));  // fd held

  auto missing = KpackArchive::open(path);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, "KPACK_IO");
  EXPECT_EQ(missing.error().file, path);
  auto dir = KpackArchive::open(testing::TempDir());
  ASSERT_FALSE(dir);
  EXPECT_EQ(dir.error().code, "KPACK_IO");
}
