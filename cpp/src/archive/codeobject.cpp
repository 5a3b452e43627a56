// Code objects: bundle unwrapping and the ELF64 symbol reader. Every
// offset, size and count read from the bytes is checked before it is used.
#include "ukdpack/archive/codeobject.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <msgpack.hpp>

#include "base/utf8.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace {

constexpr std::string_view kElfMagic(
    "\x7f"
    "ELF",
    4);
constexpr std::string_view kBundleMagic = "__CLANG_OFFLOAD_BUNDLE__";
constexpr std::string_view kCompressedBundleMagic = "CCOB";
constexpr std::uint16_t kEmAmdgpu = 224;
constexpr std::uint16_t kEmCuda = 190;
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtStrtab = 3;
constexpr std::uint32_t kShtDynsym = 11;
constexpr std::uint32_t kShtNote = 7, kShtNobits = 8;
constexpr std::uint32_t kNtAmdgpuMetadata = 32;
constexpr std::uint64_t kEflagsOffset = 0x30;
constexpr unsigned kEfAmdgpuMach = 0xff;
constexpr std::uint64_t kEhdrSize = 64;
constexpr std::uint64_t kShdrSize = 64;
constexpr std::uint64_t kSymSize = 24;
constexpr unsigned kSttObject = 1, kSttFunc = 2;
constexpr unsigned kStbLocal = 0;
constexpr unsigned kStoCudaEntry = 0x10;  // st_other bit nvcc sets on __global__ entry functions
constexpr const char* kNotAnObject =
    "not a code object: expected an AMDGPU ELF, a clang offload bundle or an NVIDIA cubin, found ";

Diagnostic fail(const std::string& code, const std::string& message) { return makeError(code, "", "", message); }

// Little-endian reads that fail instead of running past the end.
struct Bytes {
  std::string_view data;
  bool has(std::uint64_t off, std::uint64_t n) const { return off <= data.size() && n <= data.size() - off; }
  std::uint64_t le(std::uint64_t off, int n) const {  // caller checked has(off, n)
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(data[off + i]);
    return v;
  }
};

std::string hexHead(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 8); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (i) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string describe(std::string_view bytes) {
  if (bytes.empty()) return "an empty file";
  if (bytes.substr(0, kCompressedBundleMagic.size()) == kCompressedBundleMagic)
    return "a compressed offload bundle (CCOB), which ukdpack does not read; build without "
           "--offload-compress";
  return std::to_string(bytes.size()) + " bytes starting with " + hexHead(bytes);
}

// The machine of an ELF64 little-endian image, or a diagnostic.
Result<std::uint16_t> elfMachine(std::string_view elf) {
  const Bytes b{elf};
  if (!b.has(0, kEhdrSize))
    return Result<std::uint16_t>::failure(
        fail(codes::CODEOBJECT_MALFORMED,
             "malformed ELF: " + std::to_string(elf.size()) + " bytes, shorter than an ELF64 header"));
  if (elf[4] != 2 || elf[5] != 1)
    return Result<std::uint16_t>::failure(
        fail(codes::CODEOBJECT_MALFORMED, "malformed ELF: expected a 64-bit little-endian ELF"));
  return Result<std::uint16_t>::success(static_cast<std::uint16_t>(b.le(18, 2)));
}

std::uint64_t le(std::string_view d, std::uint64_t off, int n) {  // caller checked the bounds
  return Bytes{d}.le(off, n);
}

std::uint64_t align4(std::uint64_t n) { return (n + 3) / 4 * 4; }

// The amdhsa.target string of a metadata note's msgpack document, or nullopt
// when it is no map or holds no such string (the packer's reader words those).
std::optional<std::string> noteTarget(std::string_view note) {
  try {
    const std::size_t n = note.size();  // no container may claim more items than bytes
    const msgpack::unpack_limit limit(n, n, n, n, n, 64);
    std::size_t off = 0;
    const msgpack::object_handle handle = msgpack::unpack(note.data(), n, off, nullptr, nullptr, limit);
    const msgpack::object& doc = handle.get();
    if (doc.type != msgpack::type::MAP) return std::nullopt;
    std::optional<std::string> found;  // the last of duplicate keys wins, as in Python
    for (std::uint32_t i = 0; i < doc.via.map.size; ++i) {
      const msgpack::object_kv& kv = doc.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR ||
          std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) != "amdhsa.target")
        continue;
      found = kv.val.type == msgpack::type::STR
                  ? std::optional<std::string>(std::string(kv.val.via.str.ptr, kv.val.via.str.size))
                  : std::nullopt;
    }
    return found;
  } catch (...) {  // malformed msgpack: the packer's reader says what is wrong
    return std::nullopt;
  }
}

Diagnostic targetMismatch(const std::string& message) { return fail(codes::CODEOBJECT_TARGET_MISMATCH, message); }

struct BundleEntry {
  std::string triple;
  std::uint64_t offset, size;
};

Result<std::vector<BundleEntry>> bundleEntries(std::string_view data) {
  using R = Result<std::vector<BundleEntry>>;
  const Bytes b{data};
  std::uint64_t pos = kBundleMagic.size();
  if (!b.has(pos, 8))
    return R::failure(fail(codes::CODEOBJECT_MALFORMED, "truncated offload bundle: the entry count runs past the end"));
  const std::uint64_t count = b.le(pos, 8);
  pos += 8;
  if (count > (data.size() - pos) / 24)
    return R::failure(fail(codes::CODEOBJECT_MALFORMED, "corrupt offload bundle: " + std::to_string(count) +
                                                            " entries cannot fit in " + std::to_string(data.size()) +
                                                            " bytes"));
  std::vector<BundleEntry> out;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (!b.has(pos, 24))
      return R::failure(fail(codes::CODEOBJECT_MALFORMED,
                             "truncated offload bundle: entry " + std::to_string(i) + " runs past the end"));
    BundleEntry e{{}, b.le(pos, 8), b.le(pos + 8, 8)};
    const std::uint64_t tlen = b.le(pos + 16, 8);
    pos += 24;
    if (!b.has(pos, tlen))
      return R::failure(fail(codes::CODEOBJECT_MALFORMED,
                             "truncated offload bundle: entry " + std::to_string(i) + " triple runs past the end"));
    e.triple.assign(data.substr(pos, tlen));
    pos += tlen;
    if (!b.has(e.offset, e.size))
      return R::failure(fail(codes::CODEOBJECT_MALFORMED, "corrupt offload bundle: entry '" + e.triple + "' at " +
                                                              std::to_string(e.offset) + "+" + std::to_string(e.size) +
                                                              " lies outside the " + std::to_string(data.size()) +
                                                              "-byte file"));
    out.push_back(std::move(e));
  }
  return R::success(std::move(out));
}

struct Section {
  std::uint32_t type;
  std::uint32_t link;
  std::uint64_t offset, size, entsize;
};

struct Symbol {
  std::string name;
  unsigned type, bind, other;
  std::uint16_t shndx;
};

// The symbols of .symtab (or .dynsym when the object is stripped), bounds-checked.
Result<std::vector<Symbol>> elfSymbols(std::string_view elf) {
  using R = Result<std::vector<Symbol>>;
  const Bytes b{elf};
  auto bad = [](const std::string& m) { return R::failure(fail(codes::CODEOBJECT_MALFORMED, "malformed ELF: " + m)); };
  const std::uint64_t shoff = b.le(0x28, 8);
  const std::uint64_t shentsize = b.le(0x3a, 2);
  std::uint64_t shnum = b.le(0x3c, 2);
  if (shoff == 0) return bad("it has no section headers");
  if (shentsize < kShdrSize) return bad("section header size " + std::to_string(shentsize) + " is below 64");
  if (!b.has(shoff, shentsize)) return bad("the section headers lie outside the file");
  if (shnum == 0) shnum = b.le(shoff + 0x20, 8);  // extended numbering: section 0 holds the count
  if (shnum > (elf.size() - shoff) / shentsize)
    return bad(std::to_string(shnum) + " section headers at " + std::to_string(shoff) +
               " run past the end of the file");
  std::vector<Section> sections;
  sections.reserve(static_cast<std::size_t>(shnum));
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + i * shentsize;
    sections.push_back({static_cast<std::uint32_t>(b.le(h + 4, 4)), static_cast<std::uint32_t>(b.le(h + 0x28, 4)),
                        b.le(h + 0x18, 8), b.le(h + 0x20, 8), b.le(h + 0x38, 8)});
  }
  const Section* symtab = nullptr;
  for (std::uint32_t want : {kShtSymtab, kShtDynsym}) {
    const auto it = std::find_if(sections.begin(), sections.end(), [&](const Section& s) { return s.type == want; });
    if (it != sections.end()) {
      symtab = &*it;
      break;
    }
  }
  if (symtab == nullptr) return bad("it has no symbol table");
  const std::uint64_t entsize = symtab->entsize == 0 ? kSymSize : symtab->entsize;
  if (entsize < kSymSize) return bad("symbol size " + std::to_string(entsize) + " is below 24");
  if (!b.has(symtab->offset, symtab->size)) return bad("the symbol table lies outside the file");
  if (symtab->link >= sections.size() || sections[symtab->link].type != kShtStrtab)
    return bad("the symbol table links to no string table");
  const Section& strtab = sections[symtab->link];
  if (!b.has(strtab.offset, strtab.size)) return bad("the string table lies outside the file");
  const std::string_view strings = elf.substr(strtab.offset, strtab.size);
  std::vector<Symbol> out;
  const std::uint64_t count = symtab->size / entsize;
  out.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t s = symtab->offset + i * entsize;
    const std::uint64_t nameOff = b.le(s, 4);
    const unsigned info = static_cast<unsigned char>(elf[s + 4]);
    const unsigned other = static_cast<unsigned char>(elf[s + 5]);
    const auto shndx = static_cast<std::uint16_t>(b.le(s + 6, 2));
    if (nameOff >= strings.size()) {
      if (nameOff == 0) continue;  // the null symbol of an empty string table
      return bad("symbol " + std::to_string(i) + " names a string outside the string table");
    }
    const std::size_t end = strings.find('\0', nameOff);
    if (end == std::string_view::npos)
      return bad("symbol " + std::to_string(i) + " has a name that runs past the string table");
    out.push_back({std::string(strings.substr(nameOff, end - nameOff)), info & 0xf, info >> 4, other, shndx});
  }
  return R::success(std::move(out));
}

// A cubin's kernels: its defined, non-local functions. nvcc marks entry
// functions STO_CUDA_ENTRY, which tells them from the device functions a
// relocatable (-rdc) build exports too; an object marking none counts them all.
std::vector<std::string> cudaKernels(const std::vector<Symbol>& symbols) {
  std::set<std::string> functions, entries;
  for (const Symbol& s : symbols) {
    if (s.shndx == 0 || s.bind == kStbLocal || s.type != kSttFunc) continue;
    functions.insert(s.name);
    if (s.other & kStoCudaEntry) entries.insert(s.name);
  }
  const std::set<std::string>& kernels = entries.empty() ? functions : entries;
  return std::vector<std::string>(kernels.begin(), kernels.end());
}

// The sections of an ELF64 little-endian image, each bounds-checked and named:
// what the metadata readers walk.
struct ElfSection {
  std::string name;
  std::uint32_t type;
  std::string_view data;
};
struct ElfImage {
  std::uint16_t machine;
  std::uint32_t flags;
  std::vector<ElfSection> sections;
};

Result<ElfImage> readElfSections(std::string_view image) {
  using R = Result<ElfImage>;
  auto bad = [](const std::string& m) { return R::failure(fail(codes::CODEOBJECT_MALFORMED, "malformed ELF: " + m)); };
  const std::uint64_t n = image.size();
  const std::string total = std::to_string(n);
  if (n < kEhdrSize) return bad(total + " bytes cannot hold an ELF64 header");
  if (image[4] != 2 || image[5] != 1)
    return bad("expected a 64-bit little-endian ELF (class " + std::to_string(static_cast<unsigned char>(image[4])) +
               ", data " + std::to_string(static_cast<unsigned char>(image[5])) + ")");
  ElfImage out{static_cast<std::uint16_t>(le(image, 18, 2)), static_cast<std::uint32_t>(le(image, 48, 4)), {}};
  const std::uint64_t shoff = le(image, 40, 8);
  const std::uint64_t shentsize = le(image, 58, 2), shnum = le(image, 60, 2), shstrndx = le(image, 62, 2);
  if (shnum != 0 && shentsize < kShdrSize)
    return bad("section headers of " + std::to_string(shentsize) + " bytes, expected 64");
  if (shoff > n || shnum * shentsize > n - shoff)
    return bad(std::to_string(shnum) + " section headers at byte " + std::to_string(shoff) + " run past the end (" +
               total + " bytes)");
  struct Header {
    std::uint64_t name, type, offset, size;
  };
  std::vector<Header> headers;
  headers.reserve(shnum);
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t at = shoff + i * shentsize;
    Header h{le(image, at, 4), le(image, at + 4, 4), le(image, at + 24, 8), le(image, at + 32, 8)};
    if (h.type != kShtNobits && (h.offset > n || h.size > n - h.offset))
      return bad("section " + std::to_string(i) + " at " + std::to_string(h.offset) + "+" + std::to_string(h.size) +
                 " lies outside the " + total + "-byte image");
    if (h.type == kShtNobits) h.size = 0;
    headers.push_back(h);
  }
  if (shnum != 0 && shstrndx >= shnum)
    return bad("section name table " + std::to_string(shstrndx) + " of " + std::to_string(shnum) + " sections");
  const std::string_view names = shnum == 0 || headers[shstrndx].size == 0
                                     ? std::string_view()
                                     : image.substr(headers[shstrndx].offset, headers[shstrndx].size);
  out.sections.reserve(headers.size());
  for (const Header& h : headers) {
    const std::size_t end = h.name < names.size() ? names.find('\0', h.name) : std::string_view::npos;
    if (end == std::string_view::npos)
      return bad("section name at " + std::to_string(h.name) + " lies outside its table");
    out.sections.push_back({std::string(names.substr(h.name, end - h.name)), static_cast<std::uint32_t>(h.type),
                            h.size == 0 ? std::string_view() : image.substr(h.offset, h.size)});
  }
  return R::success(std::move(out));
}

struct ElfNote {
  std::string_view owner;  // trailing NULs dropped
  std::uint64_t type;
  std::string_view desc;
};

// Every note of an SHT_NOTE section (4-byte aligned).
Result<std::vector<ElfNote>> sectionNotes(const ElfSection& section) {
  using R = Result<std::vector<ElfNote>>;
  const std::string_view data = section.data;
  std::vector<ElfNote> out;
  for (std::uint64_t i = 0; i + 12 <= data.size();) {
    const std::uint64_t namesz = le(data, i, 4), descsz = le(data, i + 4, 4), type = le(data, i + 8, 4);
    const std::uint64_t nameAt = i + 12, descAt = nameAt + align4(namesz);
    if (descAt > data.size() || descsz > data.size() - descAt)
      return R::failure(fail(codes::CODEOBJECT_MALFORMED,
                             "malformed ELF: a note of " + utf8Text(section.name) + " runs past its section"));
    std::string_view owner = data.substr(nameAt, std::min(namesz, data.size() - nameAt));
    while (!owner.empty() && owner.back() == '\0') owner.remove_suffix(1);
    out.push_back({owner, type, data.substr(descAt, descsz)});
    i = descAt + align4(descsz);
  }
  return R::success(std::move(out));
}

Diagnostic badMetadata(const std::string& message) {
  return fail(codes::CODEOBJECT_MALFORMED, "bad AMDGPU metadata: " + message);
}

// Python's name of the type a msgpack value reads as (the packer's messages name them so).
std::string typeName(const msgpack::object* v) {
  if (v == nullptr) return "NoneType";
  switch (v->type) {
    case msgpack::type::NIL:
      return "NoneType";
    case msgpack::type::BOOLEAN:
      return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "float";
    case msgpack::type::STR:
      return "str";
    case msgpack::type::BIN:
      return "bytes";
    case msgpack::type::ARRAY:
      return "list";
    case msgpack::type::MAP:
      return "dict";
    default:
      return "ExtType";
  }
}

std::string_view strOf(const msgpack::object& v) { return {v.via.str.ptr, v.via.str.size}; }

// Python's repr of a str, as the messages quote names: single quotes unless the text
// holds one and no double quote.
std::string pyRepr(std::string_view s) {
  const char q = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : escapedText(s)) {
    if (c == q) out += '\\';
    out += c;
  }
  return out + q;
}

// The value of `key` in map `m` (the last of duplicate keys, as a dict keeps), or null
// when absent.
const msgpack::object* lastMember(const msgpack::object& m, std::string_view key) {
  const msgpack::object* found = nullptr;
  for (std::uint32_t i = 0; i < m.via.map.size; ++i) {
    const msgpack::object_kv& kv = m.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && strOf(kv.key) == key) found = &kv.val;
  }
  return found;
}

// lastMember, a nil value read as absent (as dict.get() reads None).
const msgpack::object* member(const msgpack::object& m, std::string_view key) {
  const msgpack::object* found = lastMember(m, key);
  return found != nullptr && found->type == msgpack::type::NIL ? nullptr : found;
}

// Why a reader of dicts and str would refuse the document (a string that is not UTF-8, a
// map key that is a list or a map), or nullptr.
const char* unreadable(const msgpack::object& v) {
  switch (v.type) {
    case msgpack::type::STR:
      return detail::validUtf8(strOf(v)) ? nullptr : "a string is not UTF-8 text";
    case msgpack::type::ARRAY:
      for (std::uint32_t i = 0; i < v.via.array.size; ++i)
        if (const char* why = unreadable(v.via.array.ptr[i])) return why;
      return nullptr;
    case msgpack::type::MAP:
      for (std::uint32_t i = 0; i < v.via.map.size; ++i) {
        const msgpack::object_kv& kv = v.via.map.ptr[i];
        if (kv.key.type == msgpack::type::ARRAY || kv.key.type == msgpack::type::MAP)
          return "a map key is a list or a map";
        if (const char* why = unreadable(kv.key)) return why;
        if (const char* why = unreadable(kv.val)) return why;
      }
      return nullptr;
    default:
      return nullptr;
  }
}

// `key` of map `m` as a string, or the problem "<where> field '<key>' should be str".
Result<std::string> strField(const msgpack::object& m, std::string_view key, const std::string& where) {
  const msgpack::object* v = member(m, key);
  if (v == nullptr || v->type != msgpack::type::STR)
    return Result<std::string>::failure(
        badMetadata(where + " field '" + std::string(key) + "' should be str, found " + typeName(v)));
  return Result<std::string>::success(std::string(strOf(*v)));
}

Result<MetadataInt> intField(const msgpack::object& m, std::string_view key, const std::string& where) {
  const msgpack::object* v = member(m, key);
  if (v == nullptr || (v->type != msgpack::type::POSITIVE_INTEGER && v->type != msgpack::type::NEGATIVE_INTEGER))
    return Result<MetadataInt>::failure(
        badMetadata(where + " field '" + std::string(key) + "' should be int, found " + typeName(v)));
  return Result<MetadataInt>::success(MetadataInt{v->type == msgpack::type::NEGATIVE_INTEGER, v->via.u64});
}

// .nv.info records: u8 format, u8 attribute, then a 2-byte value field (unused, a byte or
// a u16 by format; records stay 4-byte aligned), or for EIFMT_SVAL a u16 size and that
// many bytes. EIATTR_KPARAM_INFO describes one kernel parameter.
constexpr unsigned kEifmtNval = 1, kEifmtBval = 2, kEifmtHval = 3, kEifmtSval = 4;
constexpr unsigned kEiattrKparamInfo = 0x17;

// The parameters an .nv.info.<kernel> section records, in ordinal order. CUDA passes
// every parameter by value (a pointer is an 8-byte value), so each is a by_value
// argument; the records carry no names.
Result<std::vector<MetadataArg>> cubinParams(const ElfSection& section) {
  using R = Result<std::vector<MetadataArg>>;
  const std::string name = utf8Text(section.name);
  auto bad = [&](const std::string& m) {
    return R::failure(fail(codes::CODEOBJECT_MALFORMED, "malformed cubin: " + m));
  };
  const std::string_view data = section.data;
  std::vector<std::pair<std::uint64_t, MetadataArg>> params;
  std::uint64_t i = 0;
  while (i < data.size()) {
    if (i + 2 > data.size()) return bad(name + " ends inside a record");
    const unsigned fmt = static_cast<unsigned char>(data[i]), attr = static_cast<unsigned char>(data[i + 1]);
    if (fmt == kEifmtNval || fmt == kEifmtBval || fmt == kEifmtHval) {
      i += 4;
      continue;
    }
    if (fmt != kEifmtSval || i + 4 > data.size())
      return bad(name + " holds a record of unknown format " + std::to_string(fmt) + " at byte " + std::to_string(i));
    const std::uint64_t size = le(data, i + 2, 2);
    if (size > data.size() - (i + 4)) return bad("a record of " + name + " runs past its section");
    const std::string_view payload = data.substr(i + 4, size);
    i += 4 + size;
    if (attr != kEiattrKparamInfo) continue;
    if (size < 12)
      return bad("a parameter record of " + name + " holds " + std::to_string(size) + " bytes, expected 12");
    const std::uint64_t ordinal = le(payload, 4, 2), offset = le(payload, 6, 2), flags = le(payload, 8, 4);
    params.push_back(
        {ordinal, MetadataArg{"by_value", {false, (flags >> 18) & 0x3FFF}, {false, offset}, std::nullopt}});
  }
  std::stable_sort(params.begin(), params.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<MetadataArg> out;
  for (std::size_t k = 0; k < params.size(); ++k) {
    if (params[k].first != k) return bad(name + " does not number its parameters 0..n-1");
    out.push_back(std::move(params[k].second));
  }
  return R::success(std::move(out));
}

// Kernels and signatures of a cubin; the target is nvptx64-nvidia-cuda--sm_<NN>, the SM
// number taken from bits 8-15 of the ELF header's flags.
Result<CodeObjectMetadata> cubinMetadata(const ElfImage& elf) {
  using R = Result<CodeObjectMetadata>;
  constexpr std::string_view kInfo = ".nv.info.", kText = ".text.";
  std::map<std::string, std::vector<MetadataArg>> kernels;
  for (const ElfSection& s : elf.sections) {
    const std::string_view name = s.name;
    if (name.substr(0, kInfo.size()) == kInfo) {
      auto params = cubinParams(s);
      if (!params) return R::failure(params.error());
      kernels[std::string(name.substr(kInfo.size()))] = std::move(params.value());
    } else if (name.substr(0, kText.size()) == kText) {
      kernels.emplace(std::string(name.substr(kText.size())), std::vector<MetadataArg>{});
    }
  }
  CodeObjectMetadata out;
  out.target = "nvptx64-nvidia-cuda--sm_" + std::to_string((elf.flags >> 8) & 0xFF);
  for (auto& [name, args] : kernels) out.kernels.emplace_back(name, std::move(args));
  return R::success(std::move(out));
}

// The metadata note's descriptor of an AMDGPU image: the first note with owner AMDGPU
// and type 32, in section order, once every note of its section reads; nullopt when none.
Result<std::optional<std::string_view>> findAmdgpuNote(const ElfImage& elf) {
  using R = Result<std::optional<std::string_view>>;
  for (const ElfSection& s : elf.sections) {
    if (s.type != kShtNote) continue;
    auto notes = sectionNotes(s);
    if (!notes) return R::failure(notes.error());
    for (const ElfNote& n : notes.value())
      if (n.owner == "AMDGPU" && n.type == kNtAmdgpuMetadata) return R::success(n.desc);
  }
  return R::success(std::nullopt);
}

}  // namespace

Result<CodeObjectView> inspectCodeObject(std::string_view bytes) {
  using R = Result<CodeObjectView>;
  CodeObjectView view;
  if (bytes.substr(0, kElfMagic.size()) == kElfMagic) {
    view.elf = bytes;
  } else if (bytes.substr(0, kBundleMagic.size()) == kBundleMagic) {
    auto entries = bundleEntries(bytes);
    if (!entries) return R::failure(entries.error());
    std::vector<const BundleEntry*> amdgcn;
    std::string held;
    for (const BundleEntry& e : entries.value()) {
      held += (held.empty() ? "" : ", ") + e.triple;
      if (e.triple.find("-amdgcn-") != std::string::npos) amdgcn.push_back(&e);
    }
    if (amdgcn.empty())
      return R::failure(fail(codes::CODEOBJECT_NO_AMDGCN, "offload bundle holds no amdgcn entry (it holds: " +
                                                              (held.empty() ? std::string("no entries") : held) + ")"));
    if (amdgcn.size() > 1) {
      std::string names;
      for (const BundleEntry* e : amdgcn) names += (names.empty() ? "" : ", ") + e->triple;
      return R::failure(fail(codes::CODEOBJECT_SEVERAL_AMDGCN, "offload bundle holds several amdgcn entries (" + names +
                                                                   "); expected one per code object: compile with one "
                                                                   "--offload-arch"));
    }
    view.format = CodeObjectFormat::OffloadBundle;
    view.elf = bytes.substr(amdgcn[0]->offset, amdgcn[0]->size);
    if (view.elf.substr(0, kElfMagic.size()) != kElfMagic)
      return R::failure(
          fail(codes::CODEOBJECT_MALFORMED, "offload bundle entry '" + amdgcn[0]->triple + "' is not an ELF"));
  } else {
    return R::failure(fail(codes::CODEOBJECT_NOT_OBJECT, kNotAnObject + describe(bytes)));
  }
  auto machine = elfMachine(view.elf);
  if (!machine) return R::failure(machine.error());
  if (machine.value() == kEmCuda && view.format == CodeObjectFormat::AmdgpuElf) {
    view.format = CodeObjectFormat::CudaElf;
  } else if (machine.value() != kEmAmdgpu) {
    return R::failure(fail(codes::CODEOBJECT_NOT_OBJECT,
                           std::string(kNotAnObject) + "an ELF for machine " + std::to_string(machine.value())));
  }
  return R::success(view);
}

Result<std::vector<std::string>> codeObjectKernels(std::string_view bytes) {
  using R = Result<std::vector<std::string>>;
  auto view = inspectCodeObject(bytes);
  if (!view) return R::failure(view.error());
  auto symbols = elfSymbols(view.value().elf);
  if (!symbols) return R::failure(symbols.error());
  if (view.value().format == CodeObjectFormat::CudaElf) return R::success(cudaKernels(symbols.value()));
  // An AMDGPU kernel is a defined, non-local function with a `<name>.kd` descriptor
  // object beside it; other functions are device functions.
  std::set<std::string> descriptors, functions;
  for (const Symbol& s : symbols.value()) {
    if (s.shndx == 0 || s.bind == kStbLocal) continue;
    if (s.type == kSttFunc) functions.insert(s.name);
    if (s.type == kSttObject && s.name.size() > 3 && s.name.compare(s.name.size() - 3, 3, ".kd") == 0)
      descriptors.insert(s.name.substr(0, s.name.size() - 3));
  }
  std::vector<std::string> out;
  std::set_intersection(functions.begin(), functions.end(), descriptors.begin(), descriptors.end(),
                        std::back_inserter(out));
  return R::success(std::move(out));
}

Result<bool> codeObjectHasKernel(std::string_view bytes, const std::string& symbol) {
  auto names = codeObjectKernels(bytes);
  if (!names) return Result<bool>::failure(names.error());
  return Result<bool>::success(std::binary_search(names.value().begin(), names.value().end(), symbol));
}

std::optional<std::string_view> amdgpuMetadataNote(std::string_view image) {
  auto elf = readElfSections(image);
  if (!elf) return std::nullopt;
  auto note = findAmdgpuNote(elf.value());
  if (!note) return std::nullopt;
  return note.value();
}

Result<std::string> checkCodeObjectTarget(std::string_view bytes, std::string_view arch) {
  using R = Result<std::string>;
  auto view = inspectCodeObject(bytes);
  if (!view) return R::failure(view.error());
  if (view.value().format == CodeObjectFormat::CudaElf) return R::success("");
  const std::string_view elf = view.value().elf;
  const auto mach = static_cast<unsigned>(Bytes{elf}.le(kEflagsOffset, 4)) & kEfAmdgpuMach;
  const std::string header = amdgpuMachProcessor(mach);
  const auto note = amdgpuMetadataNote(elf);
  const std::optional<std::string> target = note ? noteTarget(*note) : std::nullopt;
  char machText[8];
  std::snprintf(machText, sizeof machText, "0x%03x", mach);
  if (header.empty()) {
    return R::failure(targetMismatch(
        "its ELF header (e_flags) names machine " + std::string(machText) + ", which is no AMDGPU processor" +
        (target ? "; its metadata note names '" + escapedText(*target) + "'" : std::string()) +
        ": the object is damaged or from a compiler newer than ukdpack; rebuild it"));
  }
  if (!target) return R::success(header);
  const std::string_view full = *target;
  const std::size_t dashes = full.rfind("--");
  const std::string named =
      bareArch(dashes != std::string_view::npos ? full.substr(dashes + 2) : full.substr(full.rfind('-') + 1));
  if (named != header) {
    return R::failure(
        targetMismatch("its ELF header (e_flags) names " + header + " but its AMDGPU metadata note (amdhsa.target '" +
                       escapedText(full) + "') names " + escapedText(named) +
                       "; a loader picks the ISA by the header, so the two must agree: rebuild the object"));
  }
  if (!arch.empty() && !targetRunsOn(header, arch)) {
    return R::failure(targetMismatch("it is built for " + header + " (ELF header e_flags and metadata note), not " +
                                     escapedText(arch) + ", the arch it is filed under"));
  }
  return R::success(header);
}

namespace {

// The metadata of an AMDGPU metadata note's msgpack document.
Result<CodeObjectMetadata> noteDocument(const msgpack::object& doc) {
  using R = Result<CodeObjectMetadata>;
  if (const char* why = unreadable(doc))
    return R::failure(badMetadata(std::string("not a msgpack document (") + why + ")"));
  if (doc.type != msgpack::type::MAP) return R::failure(badMetadata("the document is not a map"));
  CodeObjectMetadata out;
  if (const msgpack::object* target = member(doc, "amdhsa.target")) {
    if (target->type != msgpack::type::STR) return R::failure(badMetadata("amdhsa.target is not a string"));
    out.target = std::string(strOf(*target));
  }
  const msgpack::object* kernels = lastMember(doc, "amdhsa.kernels");
  if (kernels != nullptr && kernels->type != msgpack::type::ARRAY)
    return R::failure(badMetadata("amdhsa.kernels is not a list"));
  const std::uint32_t count = kernels != nullptr ? kernels->via.array.size : 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const msgpack::object& k = kernels->via.array.ptr[i];
    const std::string at = "amdhsa.kernels[" + std::to_string(i) + "]";
    if (k.type != msgpack::type::MAP) return R::failure(badMetadata(at + " is not a map"));
    auto name = strField(k, ".name", at);
    if (!name) return R::failure(name.error());
    std::vector<MetadataArg> args;
    const msgpack::object* rawArgs = lastMember(k, ".args");
    if (rawArgs != nullptr && rawArgs->type != msgpack::type::ARRAY)
      return R::failure(badMetadata("kernel " + pyRepr(name.value()) + ": .args is not a list"));
    const std::uint32_t argCount = rawArgs != nullptr ? rawArgs->via.array.size : 0;
    for (std::uint32_t j = 0; j < argCount; ++j) {
      const msgpack::object& a = rawArgs->via.array.ptr[j];
      const std::string where = "kernel " + pyRepr(name.value()) + " .args[" + std::to_string(j) + "]";
      if (a.type != msgpack::type::MAP) return R::failure(badMetadata(where + " is not a map"));
      auto kind = strField(a, ".value_kind", where);
      if (!kind) return R::failure(kind.error());
      if (kind.value().rfind("hidden_", 0) == 0) continue;
      auto size = intField(a, ".size", where);
      if (!size) return R::failure(size.error());
      auto offset = intField(a, ".offset", where);
      if (!offset) return R::failure(offset.error());
      const msgpack::object* argName = member(a, ".name");
      args.push_back({std::move(kind.value()), size.value(), offset.value(),
                      argName != nullptr && argName->type == msgpack::type::STR
                          ? std::optional<std::string>(std::string(strOf(*argName)))
                          : std::nullopt});
    }
    out.kernels.emplace_back(std::move(name.value()), std::move(args));
  }
  return R::success(std::move(out));
}

}  // namespace

Result<CodeObjectMetadata> amdgpuNoteMetadata(std::string_view note) {
  using R = Result<CodeObjectMetadata>;
  try {
    const std::size_t n = note.size();  // no container may claim more items than bytes
    const msgpack::unpack_limit limit(n, n, n, n, n, 64);
    std::size_t off = 0;
    const msgpack::object_handle handle = msgpack::unpack(note.data(), n, off, nullptr, nullptr, limit);
    if (off != n) return R::failure(badMetadata("not a msgpack document (extra data after it)"));
    return noteDocument(handle.get());
  } catch (const std::exception& e) {
    return R::failure(badMetadata(std::string("not a msgpack document (") + e.what() + ")"));
  }
}

Result<CodeObjectMetadata> codeObjectMetadata(std::string_view bytes) {
  using R = Result<CodeObjectMetadata>;
  auto view = inspectCodeObject(bytes);
  if (!view) return R::failure(view.error());
  auto elf = readElfSections(view.value().elf);
  if (!elf) return R::failure(elf.error());
  if (view.value().format == CodeObjectFormat::CudaElf) return cubinMetadata(elf.value());
  auto note = findAmdgpuNote(elf.value());
  if (!note) return R::failure(note.error());
  if (note.value()) return amdgpuNoteMetadata(*note.value());
  return R::failure(fail(codes::CODEOBJECT_MALFORMED,
                         "AMDGPU ELF has no metadata note (owner AMDGPU, type 32); code object v2 and older are "
                         "not supported: rebuild with a current compiler"));
}

}  // namespace ukdpack
