// kpack reader. Every offset and size from the file is checked against
// the file before it is used; every msgpack exception is caught here; the TOC is
// pre-scanned so that no container can claim more elements than bytes remain
// (msgpack-c allocates a container's elements as soon as it reads the header).
#include "ukdpack/archive/kpack.hpp"

#include "base/files.hpp"
#include "base/utf8.hpp"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <msgpack.hpp>
#include <optional>
#include <string_view>
#include <utility>

namespace ukdpack {

namespace {

constexpr std::uint64_t kHeaderSize = 16;
constexpr std::uint64_t kDataOffset = 64;
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kMaxDepth = 512;       // nesting of the TOC document
constexpr std::size_t kMaxListed = 20;       // keys shown in a "no entry" message
constexpr std::size_t kFrameHeaderMax = 18;  // ZSTD_FRAMEHEADERSIZE_MAX (static-only API)

std::uint32_t le32(const unsigned char* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}
std::uint64_t le64(const unsigned char* p) { return std::uint64_t(le32(p)) | std::uint64_t(le32(p + 4)) << 32; }
std::uint64_t be(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

// Walks one msgpack document without allocating per element. Returns an empty
// string when `data` is exactly one complete document whose containers each
// claim no more elements than bytes remain, else what is wrong.
std::string prescanMsgpack(const unsigned char* data, std::size_t len) {
  struct Frame {
    std::uint64_t remaining;
    bool isMap;
  };
  std::vector<Frame> stack{{1, false}};
  std::size_t pos = 0;
  auto need = [&](std::uint64_t n) { return n <= len - pos; };
  while (!stack.empty()) {
    if (pos >= len) return "truncated: the document ends before its last value";
    Frame& top = stack.back();
    const bool isKey = top.isMap && top.remaining % 2 == 0;
    --top.remaining;
    const unsigned char b = data[pos++];
    std::uint64_t skip = 0;      // payload bytes after the header
    std::uint64_t children = 0;  // items of a container
    bool container = false, isMap = false, isStr = false;
    int lenBytes = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
    } else if (b >= 0x80 && b <= 0x8f) {
      container = isMap = true, children = b & 0x0f;
    } else if (b >= 0x90 && b <= 0x9f) {
      container = true, children = b & 0x0f;
    } else if (b >= 0xa0 && b <= 0xbf) {
      isStr = true, skip = b & 0x1f;
    } else {
      switch (b) {
        case 0xc4:
          lenBytes = 1;
          break;
        case 0xc5:
          lenBytes = 2;
          break;
        case 0xc6:
          lenBytes = 4;
          break;
        case 0xc7:
          lenBytes = 1, skip = 1;
          break;
        case 0xc8:
          lenBytes = 2, skip = 1;
          break;
        case 0xc9:
          lenBytes = 4, skip = 1;
          break;
        case 0xca:
          skip = 4;
          break;
        case 0xcb:
          skip = 8;
          break;
        case 0xcc:
        case 0xd0:
          skip = 1;
          break;
        case 0xcd:
        case 0xd1:
          skip = 2;
          break;
        case 0xce:
        case 0xd2:
          skip = 4;
          break;
        case 0xcf:
        case 0xd3:
          skip = 8;
          break;
        case 0xd4:
          skip = 2;
          break;
        case 0xd5:
          skip = 3;
          break;
        case 0xd6:
          skip = 5;
          break;
        case 0xd7:
          skip = 9;
          break;
        case 0xd8:
          skip = 17;
          break;
        case 0xd9:
          isStr = true, lenBytes = 1;
          break;
        case 0xda:
          isStr = true, lenBytes = 2;
          break;
        case 0xdb:
          isStr = true, lenBytes = 4;
          break;
        case 0xdc:
          container = true, lenBytes = 2;
          break;
        case 0xdd:
          container = true, lenBytes = 4;
          break;
        case 0xde:
          container = isMap = true, lenBytes = 2;
          break;
        case 0xdf:
          container = isMap = true, lenBytes = 4;
          break;
        default:
          return "byte 0xc1 at offset " + std::to_string(pos - 1) + " is no msgpack value";
      }
      if (lenBytes > 0) {
        if (!need(std::uint64_t(lenBytes))) return "truncated: a length runs past the end";
        const std::uint64_t n = be(data + pos, lenBytes);
        pos += std::size_t(lenBytes);
        if (container)
          children = n;
        else
          skip += n;
      }
    }
    if (container) {
      if (isKey) return "a map key at offset " + std::to_string(pos) + " is a container";
      if (isMap) {
        if (children > (len - pos) / 2) return "truncated: a map claims more entries than bytes remain";
        children *= 2;
      } else if (children > len - pos) {
        return "truncated: an array claims more items than bytes remain";
      }
      if (stack.size() >= kMaxDepth) return "nested deeper than " + std::to_string(kMaxDepth) + " levels";
    } else {
      if (!need(skip)) return "truncated: a value runs past the end";
      if (isStr && !detail::validUtf8(std::string_view(reinterpret_cast<const char*>(data + pos), std::size_t(skip))))
        return "a string at offset " + std::to_string(pos) + " is not UTF-8";
      pos += std::size_t(skip);
    }
    if (container && children > 0) stack.push_back({children, isMap});
    while (!stack.empty() && stack.back().remaining == 0) stack.pop_back();
  }
  if (pos != len)
    return std::to_string(len - pos) + " trailing bytes after the TOC; the TOC must run to the end of the file";
  return {};
}

const msgpack::object* lookup(const msgpack::object& map, std::string_view key) {
  if (map.type != msgpack::type::MAP) return nullptr;
  const msgpack::object* found = nullptr;  // the last of duplicate keys wins, as in Python
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
      found = &kv.val;
  }
  return found;
}

std::optional<std::string> asString(const msgpack::object* o) {
  if (o == nullptr || o->type != msgpack::type::STR) return std::nullopt;
  return std::string(o->via.str.ptr, o->via.str.size);
}

std::optional<std::uint64_t> asUint(const msgpack::object* o) {
  if (o == nullptr || o->type != msgpack::type::POSITIVE_INTEGER) return std::nullopt;
  return o->via.u64;
}

std::string describe(const msgpack::object* o) {
  if (o == nullptr) return "missing";
  switch (o->type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return o->via.boolean ? "true" : "false";
    case msgpack::type::POSITIVE_INTEGER:
      return std::to_string(o->via.u64);
    case msgpack::type::NEGATIVE_INTEGER:
      return std::to_string(o->via.i64);
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "a float";
    case msgpack::type::STR:
      return "a string";
    case msgpack::type::BIN:
      return "binary data";
    case msgpack::type::ARRAY:
      return "a list";
    case msgpack::type::MAP:
      return "a map";
    default:
      return "an extension value";
  }
}

// Metadata becomes JSON; values JSON cannot hold are refused by name.
bool toJson(const msgpack::object& o, nlohmann::json& out, std::size_t depth, std::string& why) {
  if (depth > kMaxDepth) return why = "nests too deep", false;
  switch (o.type) {
    case msgpack::type::NIL:
      out = nullptr;
      return true;
    case msgpack::type::BOOLEAN:
      out = o.via.boolean;
      return true;
    case msgpack::type::POSITIVE_INTEGER:
      out = o.via.u64;
      return true;
    case msgpack::type::NEGATIVE_INTEGER:
      out = o.via.i64;
      return true;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      out = o.via.f64;
      return true;
    case msgpack::type::STR:
      out = std::string(o.via.str.ptr, o.via.str.size);
      return true;
    case msgpack::type::ARRAY:
      out = nlohmann::json::array();
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
        nlohmann::json item;
        if (!toJson(o.via.array.ptr[i], item, depth + 1, why)) return false;
        out.push_back(std::move(item));
      }
      return true;
    case msgpack::type::MAP:
      out = nlohmann::json::object();
      for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object_kv& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) return why = "has a key that is not a string", false;
        nlohmann::json item;
        if (!toJson(kv.val, item, depth + 1, why)) return false;
        out[std::string(kv.key.via.str.ptr, kv.key.via.str.size)] = std::move(item);
      }
      return true;
    default:
      return why = "holds " + describe(&o) + ", which JSON cannot hold", false;
  }
}

}  // namespace

struct KpackArchive::Impl {
  std::string name;
  KpackLimits limits;
  std::string bytes;      // the archive, when it came from memory
  detail::FileHandle fd;  // the archive, when it came from a file
  std::uint64_t size = 0;
  std::uint64_t tocOffset = 0;

  std::string group, family, scheme;
  std::vector<std::string> arches;
  std::map<std::string, std::map<std::string, KpackEntry>> toc;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> slots;  // absolute offset, size

  Diagnostic fail(const char* code, const std::string& message) const { return makeError(code, name, "", message); }

  // Reads [offset, offset+n) after checking it lies inside the file.
  std::optional<Diagnostic> read(std::uint64_t offset, std::uint64_t n, unsigned char* out,
                                 const std::string& what) const {
    if (offset > size || n > size - offset)
      return fail(codes::KPACK_OUT_OF_BOUNDS, what + " at " + std::to_string(offset) + "+" + std::to_string(n) +
                                                  " lies outside the " + std::to_string(size) +
                                                  "-byte file (truncated or corrupt archive)");
    if (n == 0) return std::nullopt;
    if (fd.get() < 0) {
      std::memcpy(out, bytes.data() + offset, std::size_t(n));
      return std::nullopt;
    }
    std::uint64_t done = 0;
    while (done < n) {
      const std::size_t chunk = std::size_t(std::min<std::uint64_t>(n - done, 1u << 30));
      const ssize_t got = ::pread(fd.get(), out + done, chunk, off_t(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        return fail(codes::KPACK_IO,
                    what + ": read failed (" +
                        (got < 0 ? std::string(std::strerror(errno)) : std::string("the file shrank")) + ")");
      done += std::uint64_t(got);
    }
    return std::nullopt;
  }

  std::optional<Diagnostic> region(const msgpack::object* off, const msgpack::object* sz, const std::string& what,
                                   std::uint64_t& o, std::uint64_t& s) const {
    const auto oo = asUint(off), ss = asUint(sz);
    if (!oo || !ss)
      return fail(codes::KPACK_BAD_TOC, what + ": offset and size must be non-negative integers, found " +
                                            describe(off) + " and " + describe(sz));
    o = *oo, s = *ss;
    if (o < kDataOffset || o > tocOffset || s > tocOffset - o)
      return fail(codes::KPACK_OUT_OF_BOUNDS, what + " at " + std::to_string(o) + "+" + std::to_string(s) +
                                                  " lies outside the data region " + std::to_string(kDataOffset) +
                                                  ".." + std::to_string(tocOffset) + " of the file");
    return std::nullopt;
  }

  std::optional<Diagnostic> zstdIndex(const msgpack::object& root) {
    std::uint64_t start = 0, len = 0;
    if (auto d = region(lookup(root, "zstd_offset"), lookup(root, "zstd_size"), "the zstd blob", start, len)) return d;
    if (len < 4)
      return fail(codes::KPACK_BAD_TOC,
                  "the zstd blob of " + std::to_string(len) + " bytes is too short for its frame count");
    unsigned char buf[4];
    if (auto d = read(start, 4, buf, "the zstd frame count")) return d;
    const std::uint64_t count = le32(buf);
    if (count > (len - 4) / 4)
      return fail(codes::KPACK_BAD_TOC, "the zstd blob claims " + std::to_string(count) + " frames, more than its " +
                                            std::to_string(len) + " bytes can hold");
    if (count > limits.maxEntries)
      return fail(codes::KPACK_LIMIT, "the zstd blob holds " + std::to_string(count) + " frames, over the limit of " +
                                          std::to_string(limits.maxEntries));
    const std::uint64_t end = start + len;
    std::uint64_t pos = start + 4;
    slots.reserve(std::size_t(count));
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::string what = "zstd frame " + std::to_string(i);
      if (end - pos < 4) return fail(codes::KPACK_BAD_TOC, what + ": its length runs past the end of the blob");
      if (auto d = read(pos, 4, buf, what + " length")) return d;
      const std::uint64_t flen = le32(buf);
      pos += 4;
      if (flen > end - pos)
        return fail(codes::KPACK_BAD_TOC, what + " of " + std::to_string(flen) + " bytes at " + std::to_string(pos) +
                                              " runs past the end of the blob (" + std::to_string(end) + ")");
      slots.emplace_back(pos, flen);
      pos += flen;
    }
    if (pos != end)
      return fail(codes::KPACK_BAD_TOC,
                  "the zstd blob has " + std::to_string(end - pos) + " bytes after its last frame");
    return std::nullopt;
  }

  std::optional<Diagnostic> blobIndex(const msgpack::object& root) {
    const msgpack::object* blobs = lookup(root, "blobs");
    if (blobs == nullptr) return std::nullopt;  // no payloads
    if (blobs->type != msgpack::type::ARRAY) return fail(codes::KPACK_BAD_TOC, "TOC blobs is not a list");
    if (blobs->via.array.size > limits.maxEntries)
      return fail(codes::KPACK_LIMIT, "TOC lists " + std::to_string(blobs->via.array.size) +
                                          " blobs, over the limit of " + std::to_string(limits.maxEntries));
    slots.reserve(blobs->via.array.size);
    for (std::uint32_t i = 0; i < blobs->via.array.size; ++i) {
      const msgpack::object& b = blobs->via.array.ptr[i];
      const std::string what = "blob " + std::to_string(i);
      if (b.type != msgpack::type::MAP)
        return fail(codes::KPACK_BAD_TOC, "TOC blobs[" + std::to_string(i) + "] is not a map");
      std::uint64_t o = 0, s = 0;
      if (auto d = region(lookup(b, "offset"), lookup(b, "size"), what, o, s)) return d;
      slots.emplace_back(o, s);
    }
    return std::nullopt;
  }

  // The content size a zstd frame records in its header.
  std::optional<Diagnostic> frameSize(const unsigned char* frame, std::size_t n, const std::string& where,
                                      std::uint64_t& out) const {
    const unsigned long long fcs = ZSTD_getFrameContentSize(frame, n);
    if (fcs == ZSTD_CONTENTSIZE_ERROR) return fail(codes::KPACK_BAD_FRAME, where + ": not a zstd frame");
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN)
      return fail(codes::KPACK_BAD_FRAME, where + ": the zstd frame records no content size in its header");
    out = fcs;
    return std::nullopt;
  }

  std::optional<Diagnostic> entry(const std::string& key, const std::string& arch, const msgpack::object& raw,
                                  KpackEntry& out) const {
    const std::string where = "entry '" + key + "' for " + arch;
    if (raw.type != msgpack::type::MAP) return fail(codes::KPACK_BAD_TOC, where + " is not a map");
    const auto type = asString(lookup(raw, "type"));
    if (!type) return fail(codes::KPACK_BAD_TOC, where + ": type is not a string");
    const msgpack::object* ordObj = lookup(raw, "ordinal");
    const auto ordinal = asUint(ordObj);
    if (!ordinal || *ordinal >= slots.size())
      return fail(codes::KPACK_BAD_TOC, where + ": ordinal " + describe(ordObj) +
                                            " is out of range (the archive holds " + std::to_string(slots.size()) +
                                            " payloads)");
    const msgpack::object* sizeObj = lookup(raw, "original_size");
    std::uint64_t size = 0;
    if (sizeObj == nullptr || sizeObj->type == msgpack::type::NIL) {
      // Optional in rocm-kpack: fall back on what the payload says.
      const auto& [off, len] = slots[std::size_t(*ordinal)];
      if (scheme == "none") {
        size = len;
      } else {
        unsigned char head[kFrameHeaderMax];
        const std::size_t n = std::size_t(std::min<std::uint64_t>(len, sizeof head));
        if (auto d = read(off, n, head, where + " frame")) return d;
        if (auto d = frameSize(head, n, where, size)) return d;
      }
    } else if (const auto s = asUint(sizeObj)) {
      size = *s;
    } else {
      return fail(codes::KPACK_BAD_TOC,
                  where + ": original_size " + describe(sizeObj) + " is not a non-negative integer");
    }
    if (size > limits.maxOriginalSize)
      return fail(codes::KPACK_LIMIT, where + ": original_size " + std::to_string(size) + " is over the limit of " +
                                          std::to_string(limits.maxOriginalSize) + " bytes");
    if (scheme == "none" && slots[std::size_t(*ordinal)].second != size)
      return fail(codes::KPACK_BAD_TOC, where + ": original_size " + std::to_string(size) +
                                            " differs from its blob's " +
                                            std::to_string(slots[std::size_t(*ordinal)].second) + " bytes");
    out.type = *type;
    out.ordinal = *ordinal;
    out.originalSize = size;
    out.metadata = nullptr;
    const msgpack::object* md = lookup(raw, "metadata");
    if (md != nullptr && md->type != msgpack::type::NIL) {
      if (md->type != msgpack::type::MAP) return fail(codes::KPACK_BAD_TOC, where + ": metadata is not a map");
      std::string why;
      if (!toJson(*md, out.metadata, 0, why)) return fail(codes::KPACK_BAD_TOC, where + ": metadata " + why);
    }
    return std::nullopt;
  }

  std::optional<Diagnostic> parseToc(const msgpack::object& root) {
    if (root.type != msgpack::type::MAP)
      return fail(codes::KPACK_BAD_TOC, "the TOC is " + describe(&root) + ", expected a map");
    const msgpack::object* fv = lookup(root, "format_version");
    if (!asUint(fv) || *asUint(fv) != kFormatVersion)
      return fail(codes::KPACK_VERSION,
                  "TOC format_version is " + describe(fv) + "; this reader reads " + std::to_string(kFormatVersion));
    for (auto [key, dst] : {std::pair<const char*, std::string*>{"group_name", &group}, {"gfx_arch_family", &family}}) {
      const msgpack::object* o = lookup(root, key);
      const auto s = asString(o);
      if (!s)
        return fail(codes::KPACK_BAD_TOC, std::string("TOC ") + key + " is " + describe(o) + ", expected a string");
      *dst = *s;
    }
    const msgpack::object* ga = lookup(root, "gfx_arches");
    if (ga == nullptr || ga->type != msgpack::type::ARRAY)
      return fail(codes::KPACK_BAD_TOC, "TOC gfx_arches is not a list of strings");
    for (std::uint32_t i = 0; i < ga->via.array.size; ++i) {
      const auto s = asString(&ga->via.array.ptr[i]);
      if (!s) return fail(codes::KPACK_BAD_TOC, "TOC gfx_arches is not a list of strings");
      arches.push_back(*s);
    }
    const msgpack::object* sc = lookup(root, "compression_scheme");
    if (sc == nullptr) {
      scheme = "none";  // a missing scheme means uncompressed
    } else if (const auto s = asString(sc); s && (*s == "none" || *s == "zstd-per-kernel")) {
      scheme = *s;
    } else {
      return fail(codes::KPACK_BAD_TOC, "unknown compression scheme " + (s ? "'" + *s + "'" : describe(sc)) +
                                            "; this reader reads zstd-per-kernel, none");
    }
    if (auto d = scheme == "zstd-per-kernel" ? zstdIndex(root) : blobIndex(root)) return d;
    const msgpack::object* body = lookup(root, "toc");
    if (body == nullptr || body->type != msgpack::type::MAP)
      return fail(codes::KPACK_BAD_TOC, "TOC 'toc' is not a map");
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < body->via.map.size; ++i) {
      const msgpack::object_kv& kv = body->via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR || kv.val.type != msgpack::type::MAP)
        return fail(codes::KPACK_BAD_TOC,
                    "TOC entry " +
                        (kv.key.type == msgpack::type::STR ? "'" + *asString(&kv.key) + "'" : describe(&kv.key)) +
                        " is not a map from arch to entry");
      const std::string key = *asString(&kv.key);
      std::map<std::string, KpackEntry> perArch;
      for (std::uint32_t j = 0; j < kv.val.via.map.size; ++j) {
        const msgpack::object_kv& akv = kv.val.via.map.ptr[j];
        const auto arch = asString(&akv.key);
        if (!arch)
          return fail(codes::KPACK_BAD_TOC, "TOC entry '" + key + "' has a non-string arch " + describe(&akv.key));
        if (++total > limits.maxEntries)
          return fail(codes::KPACK_LIMIT, "the TOC holds more than " + std::to_string(limits.maxEntries) + " entries");
        KpackEntry e;
        if (auto d = entry(key, *arch, akv.val, e)) return d;
        perArch[*arch] = std::move(e);  // a duplicate arch: the last wins, as in Python
      }
      toc[key] = std::move(perArch);
    }
    return std::nullopt;
  }

  std::optional<Diagnostic> load() {
    if (size < kHeaderSize)
      return fail(codes::KPACK_BAD_HEADER,
                  "truncated archive: " + std::to_string(size) + " bytes, shorter than the 16-byte KPAK header");
    unsigned char header[kHeaderSize];
    if (auto d = read(0, kHeaderSize, header, "the header")) return d;
    if (std::memcmp(header, "KPAK", 4) != 0)
      return fail(codes::KPACK_BAD_HEADER, "not a kpack archive: expected magic KPAK");
    const std::uint32_t version = le32(header + 4);
    if (version != kFormatVersion)
      return fail(codes::KPACK_VERSION, "kpack format version " + std::to_string(version) +
                                            "; this reader reads version " + std::to_string(kFormatVersion));
    tocOffset = le64(header + 8);
    if (tocOffset < kDataOffset || tocOffset >= size)
      return fail(codes::KPACK_OUT_OF_BOUNDS,
                  "TOC offset " + std::to_string(tocOffset) + " lies outside the data of the " + std::to_string(size) +
                      "-byte file (expected " + std::to_string(kDataOffset) + ".." + std::to_string(size - 1) + ")");
    const std::uint64_t tocSize = size - tocOffset;
    if (tocSize > limits.maxTocSize)
      return fail(codes::KPACK_LIMIT, "TOC of " + std::to_string(tocSize) + " bytes is over the " +
                                          std::to_string(limits.maxTocSize) + "-byte limit");
    std::vector<unsigned char> raw(static_cast<std::size_t>(tocSize));
    if (auto d = read(tocOffset, tocSize, raw.data(), "the TOC")) return d;
    const std::string problem = prescanMsgpack(raw.data(), raw.size());
    if (!problem.empty()) {
      const bool trailing = problem.find("trailing bytes") != std::string::npos;
      return fail(codes::KPACK_BAD_TOC, trailing ? problem
                                                 : "the TOC at offset " + std::to_string(tocOffset) +
                                                       " is not a msgpack document (" + problem + ")");
    }
    try {
      // Limits are defence in depth: the pre-scan already bounds every claim.
      const std::size_t n = raw.size();
      const msgpack::unpack_limit limit(n, n, n, n, n, kMaxDepth + 1);
      std::size_t off = 0;
      const msgpack::object_handle handle =
          msgpack::unpack(reinterpret_cast<const char*>(raw.data()), n, off, nullptr, nullptr, limit);
      return parseToc(handle.get());
    } catch (const std::exception& e) {
      return fail(codes::KPACK_BAD_TOC, std::string("the TOC is not a msgpack document: ") + e.what());
    } catch (...) {
      return fail(codes::KPACK_BAD_TOC, "the TOC is not a msgpack document");
    }
  }
};

KpackArchive::KpackArchive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KpackArchive::KpackArchive(KpackArchive&&) noexcept = default;
KpackArchive& KpackArchive::operator=(KpackArchive&&) noexcept = default;
KpackArchive::~KpackArchive() = default;

Result<KpackArchive> KpackArchive::open(const std::filesystem::path& path, const KpackLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->name = path.string();
  impl->limits = limits;
  // Opened non-blocking and fstat'ed before any read: a FIFO, socket or device
  // named like the archive is refused at once, never waited on.
  auto opened = detail::openRegularFile(path);
  if (!opened) return Result<KpackArchive>::failure(impl->fail(codes::KPACK_IO, opened.error().message));
  impl->fd = std::move(opened.value().fd);
  impl->size = opened.value().size;
  if (auto d = impl->load()) return Result<KpackArchive>::failure(std::move(*d));
  return Result<KpackArchive>::success(KpackArchive(std::move(impl)));
}

Result<KpackArchive> KpackArchive::fromBytes(std::string bytes, std::string name, const KpackLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->limits = limits;
  impl->bytes = std::move(bytes);
  impl->size = impl->bytes.size();
  if (auto d = impl->load()) return Result<KpackArchive>::failure(std::move(*d));
  return Result<KpackArchive>::success(KpackArchive(std::move(impl)));
}

const std::string& KpackArchive::path() const { return impl_->name; }
const std::string& KpackArchive::groupName() const { return impl_->group; }
const std::string& KpackArchive::archFamily() const { return impl_->family; }
const std::vector<std::string>& KpackArchive::arches() const { return impl_->arches; }
const std::string& KpackArchive::compressionScheme() const { return impl_->scheme; }

std::vector<std::string> KpackArchive::keys() const {
  std::vector<std::string> out;
  out.reserve(impl_->toc.size());
  for (const auto& kv : impl_->toc) out.push_back(kv.first);
  return out;  // std::map keeps them sorted
}

const KpackEntry* KpackArchive::find(const std::string& tocKey, const std::string& arch) const {
  const auto it = impl_->toc.find(tocKey);
  if (it == impl_->toc.end()) return nullptr;
  const auto a = it->second.find(arch);
  return a == it->second.end() ? nullptr : &a->second;
}

Result<std::vector<std::uint8_t>> KpackArchive::get(const std::string& tocKey, const std::string& arch) const {
  using R = Result<std::vector<std::uint8_t>>;
  const Impl& im = *impl_;
  const auto it = im.toc.find(tocKey);
  if (it == im.toc.end()) {
    std::string shown;
    std::size_t n = 0;
    for (const auto& kv : im.toc) {
      if (n == kMaxListed) {
        shown += ", ... (" + std::to_string(im.toc.size()) + " in all)";
        break;
      }
      shown += (n++ ? ", " : "") + kv.first;
    }
    return R::failure(
        im.fail(codes::KPACK_NO_ENTRY, "no entry for toc key '" + tocKey + "' (arch " + arch +
                                           "); the archive holds keys: " + (shown.empty() ? "none" : shown)));
  }
  const auto a = it->second.find(arch);
  if (a == it->second.end()) {
    std::string held;
    for (const auto& kv : it->second) held += (held.empty() ? "" : ", ") + kv.first;
    return R::failure(im.fail(codes::KPACK_NO_ENTRY, "no entry for toc key '" + tocKey + "' and arch '" + arch +
                                                         "'; for that key the archive holds arches: " + held));
  }
  const KpackEntry& e = a->second;
  const std::string where = "entry '" + tocKey + "' for " + arch;
  const auto [offset, size] = im.slots[std::size_t(e.ordinal)];
  if (im.scheme == "none") {
    std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
    if (auto d = im.read(offset, size, out.data(), where)) return R::failure(std::move(*d));
    return R::success(std::move(out));
  }
  std::vector<std::uint8_t> frame(static_cast<std::size_t>(size));
  if (auto d = im.read(offset, size, frame.data(), where)) return R::failure(std::move(*d));
  std::uint64_t fcs = 0;
  if (auto d = im.frameSize(frame.data(), frame.size(), where, fcs)) return R::failure(std::move(*d));
  if (fcs != e.originalSize)
    return R::failure(im.fail(codes::KPACK_BAD_FRAME, where + ": the frame decompresses to " + std::to_string(fcs) +
                                                          " bytes but the TOC says original_size " +
                                                          std::to_string(e.originalSize)));
  // One frame exactly: ZSTD_decompress would also decode frames that follow.
  const std::size_t csize = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(csize) || csize != frame.size())
    return R::failure(im.fail(codes::KPACK_BAD_FRAME, where + ": corrupt zstd frame: " +
                                                          (ZSTD_isError(csize) ? std::string(ZSTD_getErrorName(csize))
                                                                               : std::to_string(frame.size() - csize) +
                                                                                     " bytes follow the frame")));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(fcs));
  const std::size_t got = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(got))
    return R::failure(im.fail(codes::KPACK_BAD_FRAME, where + ": corrupt zstd frame: " + ZSTD_getErrorName(got)));
  if (got != e.originalSize)
    return R::failure(im.fail(codes::KPACK_BAD_FRAME, where + ": decompressed " + std::to_string(got) +
                                                          " bytes, the TOC says original_size " +
                                                          std::to_string(e.originalSize)));
  return R::success(std::move(out));
}

}  // namespace ukdpack
