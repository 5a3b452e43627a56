// The code-object symbol reader on the committed hipcc objects in tests/data/objects
// (see tests/data/make_objects.sh), on bundles assembled here, and on damaged bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ukdpack/archive/codeobject.hpp"

namespace {

const std::vector<std::string> kSplitKv = {"split_kv_consume", "split_kv_produce", "split_kv_unused"};
const char* kArches[] = {"gfx90a", "gfx1030"};

std::string readObject(const std::string& name) {
  std::ifstream f(std::string(UKDPACK_TEST_DATA_DIR) + "/data/objects/" + name, std::ios::binary);
  EXPECT_TRUE(f) << "missing test object " << name;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += char((v >> (8 * i)) & 0xff);
  return s;
}

std::uint64_t readLe(const std::string& s, std::size_t off, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(s[off + i]);
  return v;
}

void put(std::string& s, std::size_t off, std::uint64_t v, int n) { s.replace(off, n, le(v, n)); }

std::string bundle(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string head = "__CLANG_OFFLOAD_BUNDLE__" + le(entries.size(), 8);
  std::size_t pos = head.size();
  for (const auto& e : entries) pos += 24 + e.first.size();
  std::string table, blobs;
  for (const auto& [triple, blob] : entries) {
    table += le(pos, 8) + le(blob.size(), 8) + le(triple.size(), 8) + triple;
    blobs += blob;
    pos += blob.size();
  }
  return head + table + blobs;
}

// Section header i of an ELF64 image: its offset in the file.
std::size_t shdr(const std::string& elf, std::size_t i) { return readLe(elf, 0x28, 8) + i * readLe(elf, 0x3a, 2); }

std::size_t symtabIndex(const std::string& elf) {
  const std::size_t n = readLe(elf, 0x3c, 2);
  for (std::size_t i = 0; i < n; ++i)
    if (readLe(elf, shdr(elf, i) + 4, 4) == 2) return i;
  ADD_FAILURE() << "no .symtab";
  return 0;
}

std::string errorOf(const std::string& bytes) {
  auto r = ukdpack::codeObjectKernels(bytes);
  return r ? std::string() : r.error().message;
}

}  // namespace

TEST(CodeObject, CommittedObjectsListTheirKernels) {
  for (const char* arch : kArches) {
    for (const std::string suffix : {".hsaco", ".bundle.hsaco"}) {
      const std::string bytes = readObject(std::string("split_kv.") + arch + suffix);
      auto names = ukdpack::codeObjectKernels(bytes);
      ASSERT_TRUE(names) << names.error().str();
      EXPECT_EQ(names.value(), kSplitKv) << arch << suffix;
      EXPECT_TRUE(ukdpack::codeObjectHasKernel(bytes, "split_kv_produce").value());
      // The kernel descriptor is an object, not a kernel.
      EXPECT_FALSE(ukdpack::codeObjectHasKernel(bytes, "split_kv_produce.kd").value());
      EXPECT_FALSE(ukdpack::codeObjectHasKernel(bytes, "split_kv").value());
    }
  }
}

TEST(CodeObject, BundleUnwrapsToTheCommittedElf) {
  for (const char* arch : kArches) {
    const std::string bare = readObject(std::string("split_kv.") + arch + ".hsaco");
    const std::string wrapped = readObject(std::string("split_kv.") + arch + ".bundle.hsaco");
    auto b = ukdpack::inspectCodeObject(wrapped);
    ASSERT_TRUE(b) << b.error().str();
    EXPECT_EQ(b.value().format, ukdpack::CodeObjectFormat::OffloadBundle);
    EXPECT_EQ(b.value().elf, bare);
    auto e = ukdpack::inspectCodeObject(bare);
    ASSERT_TRUE(e);
    EXPECT_EQ(e.value().format, ukdpack::CodeObjectFormat::AmdgpuElf);
    EXPECT_EQ(e.value().elf.data(), bare.data());
    EXPECT_EQ(e.value().elf.size(), bare.size());
  }
}

TEST(CodeObject, NonObjectsAreRefusedByName) {
  const std::string prefix =
      "not a code object: expected an AMDGPU ELF, a clang offload bundle or an NVIDIA cubin, found ";
  EXPECT_EQ(errorOf(""), prefix + "an empty file");
  EXPECT_EQ(errorOf("hello, world"), prefix + "12 bytes starting with 68 65 6c 6c 6f 2c 20 77");
  EXPECT_NE(errorOf("CCOB" + std::string(40, '\0')).find("compressed offload bundle"), std::string::npos);
  std::string x86 = readObject("split_kv.gfx90a.hsaco");
  put(x86, 18, 62, 2);  // EM_X86_64
  EXPECT_EQ(errorOf(x86), prefix + "an ELF for machine 62");
  auto r = ukdpack::codeObjectKernels("");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "CODEOBJECT_NOT_OBJECT");
}

TEST(CodeObject, BundlesNeedExactlyOneAmdgcnEntry) {
  const std::string a = readObject("split_kv.gfx90a.hsaco");
  const std::string b = readObject("split_kv.gfx1030.hsaco");
  const std::string none = bundle({{"host-x86_64-unknown-linux", ""}});
  EXPECT_NE(errorOf(none).find("no amdgcn entry (it holds: host-x86_64-unknown-linux)"), std::string::npos);
  const std::string two = bundle({{"host-x86_64-unknown-linux", ""},
                                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", a},
                                  {"hipv4-amdgcn-amd-amdhsa--gfx1030", b}});
  EXPECT_NE(errorOf(two).find("several amdgcn entries (hipv4-amdgcn-amd-amdhsa--gfx90a, "
                              "hipv4-amdgcn-amd-amdhsa--gfx1030)"),
            std::string::npos)
      << errorOf(two);
  const std::string one = bundle({{"host-x86_64-unknown-linux", ""}, {"hip-amdgcn-amd-amdhsa--gfx1030", b}});
  auto names = ukdpack::codeObjectKernels(one);
  ASSERT_TRUE(names) << names.error().str();
  EXPECT_EQ(names.value(), kSplitKv);
  const std::string notElf = bundle({{"hipv4-amdgcn-amd-amdhsa--gfx90a", "garbage"}});
  EXPECT_NE(errorOf(notElf).find("is not an ELF"), std::string::npos);
}

TEST(CodeObject, BundleEntriesOutsideTheFileAreRefused) {
  std::string b = bundle({{"hipv4-amdgcn-amd-amdhsa--gfx90a", readObject("split_kv.gfx90a.hsaco")}});
  std::string far = b;
  put(far, 32, 1ull << 40, 8);  // entry offset
  EXPECT_NE(errorOf(far).find("lies outside"), std::string::npos);
  std::string big = b;
  put(big, 40, ~0ull, 8);  // entry size
  EXPECT_NE(errorOf(big).find("lies outside"), std::string::npos);
  std::string count = b;
  put(count, 24, 1ull << 60, 8);
  EXPECT_NE(errorOf(count).find("cannot fit"), std::string::npos);
  std::string triple = b;
  put(triple, 48, 1ull << 50, 8);
  EXPECT_NE(errorOf(triple).find("triple runs past the end"), std::string::npos);
}

// Real cubins are in backend_test.cpp; an ELF relabelled EM_CUDA marks no entry
// function (STO_CUDA_ENTRY), so every defined global function counts.
TEST(CodeObject, CudaElfIsRecognisedAndItsFunctionsListed) {
  std::string cubin = readObject("split_kv.gfx90a.hsaco");
  put(cubin, 18, 190, 2);  // EM_CUDA
  auto view = ukdpack::inspectCodeObject(cubin);
  ASSERT_TRUE(view) << view.error().str();
  EXPECT_EQ(view.value().format, ukdpack::CodeObjectFormat::CudaElf);
  auto names = ukdpack::codeObjectKernels(cubin);
  ASSERT_TRUE(names) << names.error().str();
  EXPECT_EQ(names.value(), kSplitKv);
}

TEST(CodeObject, DamagedHeadersAndTablesAreRefusedByName) {
  const std::string elf = readObject("split_kv.gfx90a.hsaco");
  const std::size_t sym = shdr(elf, symtabIndex(elf));
  struct Case {
    std::size_t off;
    std::uint64_t value;
    int width;
    const char* fragment;
  };
  const Case cases[] = {
      {0x28, 1ull << 40, 8, "section headers lie outside"},
      {0x28, 0, 8, "no section headers"},
      {0x3a, 10, 2, "below 64"},
      {0x3c, 0xffff, 2, "run past the end"},
      {sym + 0x18, 1ull << 40, 8, "symbol table lies outside"},
      {sym + 0x20, ~0ull, 8, "symbol table lies outside"},
      {sym + 0x28, 0xffff, 4, "links to no string table"},
      {sym + 0x38, 8, 8, "symbol size 8 is below 24"},
  };
  for (const Case& c : cases) {
    std::string bad = elf;
    put(bad, c.off, c.value, c.width);
    EXPECT_NE(errorOf(bad).find(c.fragment), std::string::npos) << c.fragment << " / got: " << errorOf(bad);
  }
  // A symbol whose name points past its string table.
  std::string name = elf;
  const std::size_t firstSym = readLe(elf, sym + 0x18, 8) + 24;  // skip the null symbol
  put(name, firstSym, 0x7fffffff, 4);
  EXPECT_NE(errorOf(name).find("outside the string table"), std::string::npos) << errorOf(name);
  std::string noSymtab = elf;
  put(noSymtab, sym + 4, 1, 4);  // .symtab becomes PROGBITS; .dynsym still lists the kernels
  auto dyn = ukdpack::codeObjectKernels(noSymtab);
  ASSERT_TRUE(dyn) << dyn.error().str();
  EXPECT_EQ(dyn.value(), kSplitKv);
}

TEST(CodeObject, AKernelIsAGlobalFunctionWithADescriptor) {
  const std::string elf = readObject("split_kv.gfx90a.hsaco");
  const std::size_t sym = shdr(elf, symtabIndex(elf));
  const std::size_t tab = readLe(elf, sym + 0x18, 8), count = readLe(elf, sym + 0x20, 8) / 24;
  const std::size_t strtab = readLe(elf, shdr(elf, readLe(elf, sym + 0x28, 4)) + 0x18, 8);
  auto find = [&](const std::string& name) -> std::size_t {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t s = tab + i * 24;
      if (std::string(elf.c_str() + strtab + readLe(elf, s, 4)) == name) return s;
    }
    ADD_FAILURE() << "no symbol " << name;
    return 0;
  };
  auto kernelsOf = [](const std::string& bytes) {
    auto r = ukdpack::codeObjectKernels(bytes);
    EXPECT_TRUE(r) << r.error().str();
    return r ? r.value() : std::vector<std::string>{};
  };
  const std::vector<std::string> twoLeft = {"split_kv_consume", "split_kv_produce"};
  std::string noDescriptor = elf;  // split_kv_unused.kd: STT_OBJECT -> STT_NOTYPE
  const std::size_t kd = find("split_kv_unused.kd");
  noDescriptor[kd + 4] = char(static_cast<unsigned char>(elf[kd + 4]) & 0xf0);
  EXPECT_EQ(kernelsOf(noDescriptor), twoLeft);
  std::string local = elf;  // split_kv_unused: STB_GLOBAL -> STB_LOCAL
  const std::size_t fn = find("split_kv_unused");
  local[fn + 4] = char(static_cast<unsigned char>(elf[fn + 4]) & 0x0f);
  EXPECT_EQ(kernelsOf(local), twoLeft);
  std::string undefined = elf;  // split_kv_unused: section index -> SHN_UNDEF
  put(undefined, fn + 6, 0, 2);
  EXPECT_EQ(kernelsOf(undefined), twoLeft);
  EXPECT_EQ(kernelsOf(elf), kSplitKv);
}

TEST(CodeObject, EveryTruncationAndByteFlipIsHandled) {
  for (const std::string file : {"split_kv.gfx1030.hsaco", "split_kv.gfx90a.bundle.hsaco"}) {
    const std::string full = readObject(file);
    std::size_t refused = 0;
    for (std::size_t n = 0; n < full.size(); ++n) {
      auto r = ukdpack::codeObjectKernels(std::string_view(full).substr(0, n));
      if (!r) {
        ++refused;
        EXPECT_FALSE(r.error().message.empty());
      }
    }
    // Section headers sit at the end: every prefix loses them.
    EXPECT_EQ(refused, full.size()) << file;
    for (std::size_t i = 0; i < full.size(); ++i) {
      std::string bad = full;
      bad[i] = char(static_cast<unsigned char>(bad[i]) ^ 0xff);
      auto r = ukdpack::codeObjectKernels(bad);
      if (!r) {
        EXPECT_FALSE(r.error().message.empty());
      }
    }
  }
}

// e_flags (offset 0x30; its low byte is EF_AMDGPU_MACH) against the metadata note,
// on the committed hipcc objects, bare and bundled; only that byte is changed.
TEST(CodeObject, HeaderAndMetadataNoteMustNameOneProcessor) {
  const std::pair<const char*, unsigned> truth[] = {{"gfx90a", 0x3f}, {"gfx1030", 0x36}};
  for (const auto& [arch, mach] : truth) {
    for (const std::string suffix : {".hsaco", ".bundle.hsaco"}) {
      const std::string bytes = readObject(std::string("split_kv.") + arch + suffix);
      auto good = ukdpack::checkCodeObjectTarget(bytes);
      ASSERT_TRUE(good) << good.error().str();
      EXPECT_EQ(good.value(), arch);
      EXPECT_TRUE(ukdpack::checkCodeObjectTarget(bytes, arch));
      const std::size_t at = ukdpack::inspectCodeObject(bytes).value().elf.data() - bytes.data() + 0x30;
      ASSERT_EQ(static_cast<unsigned char>(bytes[at]), mach);
      std::string lying = bytes;
      lying[at] = char(0x54);  // gfx11-generic
      auto bad = ukdpack::checkCodeObjectTarget(lying);
      ASSERT_FALSE(bad) << arch << suffix;
      EXPECT_EQ(bad.error().code, "CODEOBJECT_TARGET_MISMATCH");
      EXPECT_NE(bad.error().message.find("names gfx11-generic but its AMDGPU metadata note"), std::string::npos)
          << bad.error().message;
      EXPECT_NE(bad.error().message.find(std::string("names ") + arch + ";"), std::string::npos) << bad.error().message;
      lying[at] = char(0x49);  // reserved by LLVM: no processor
      auto unknown = ukdpack::checkCodeObjectTarget(lying);
      ASSERT_FALSE(unknown);
      EXPECT_NE(unknown.error().message.find("names machine 0x049, which is no AMDGPU processor"), std::string::npos)
          << unknown.error().message;
      // Filed under an arch it does not run on: refused, both named.
      auto elsewhere = ukdpack::checkCodeObjectTarget(bytes, std::string(arch) == "gfx90a" ? "gfx1030" : "gfx90a");
      ASSERT_FALSE(elsewhere);
      EXPECT_NE(elsewhere.error().message.find(std::string("built for ") + arch), std::string::npos);
    }
  }
}

// The metadata reader (kernels, target, signatures): the one the packer asks through
// the extension. The committed objects read as hipcc and nvcc wrote them.
TEST(CodeObject, MetadataOfTheCommittedObjects) {
  for (const char* arch : kArches) {
    for (const std::string suffix : {".hsaco", ".bundle.hsaco"}) {
      auto meta = ukdpack::codeObjectMetadata(readObject(std::string("split_kv.") + arch + suffix));
      ASSERT_TRUE(meta) << arch << suffix << ": " << meta.error().message;
      EXPECT_EQ(meta.value().target.value_or(""), std::string("amdgcn-amd-amdhsa--") + arch);
      std::vector<std::string> names;
      for (const auto& [name, args] : meta.value().kernels) {
        names.push_back(name);
        if (name != "split_kv_unused") {  // it takes no argument
          EXPECT_FALSE(args.empty()) << name;
        }
        for (const ukdpack::MetadataArg& a : args) EXPECT_NE(a.kind.rfind("hidden_", 0), 0u) << name;
      }
      std::sort(names.begin(), names.end());
      EXPECT_EQ(names, kSplitKv);
    }
  }
  auto cubin = ukdpack::codeObjectMetadata(readObject("split_kv.sm_90.cubin"));
  ASSERT_TRUE(cubin) << cubin.error().message;
  EXPECT_EQ(cubin.value().target.value_or(""), "nvptx64-nvidia-cuda--sm_90");
  ASSERT_FALSE(cubin.value().kernels.empty());
  for (const auto& [name, args] : cubin.value().kernels) {
    for (const ukdpack::MetadataArg& a : args) EXPECT_EQ(a.kind, "by_value") << name;
  }
}

TEST(CodeObject, MetadataNotesThatDoNotHoldTogetherAreRefusedByName) {
  const auto refusal = [](const std::string& note) {
    auto meta = ukdpack::amdgpuNoteMetadata(note);
    EXPECT_FALSE(meta);
    return meta ? std::string() : meta.error().message;
  };
  EXPECT_EQ(refusal("\x90"), "bad AMDGPU metadata: the document is not a map");
  EXPECT_EQ(refusal("\x81\xad"
                    "amdhsa.target\x01"),
            "bad AMDGPU metadata: amdhsa.target is not a string");
  EXPECT_EQ(refusal("\x81\xae"
                    "amdhsa.kernels\x01"),
            "bad AMDGPU metadata: amdhsa.kernels is not a list");
  EXPECT_EQ(refusal("\x81\xae"
                    "amdhsa.kernels\x91\x80"),
            "bad AMDGPU metadata: amdhsa.kernels[0] field '.name' should be str, found NoneType");
  EXPECT_EQ(refusal("\x81\xae"
                    "amdhsa.kernels\x91\x82\xa5.name\xa1k\xa5.args\x91\x82\xab.value_kind\xa8"
                    "by_value\xa5.size\xa1x"),
            "bad AMDGPU metadata: kernel 'k' .args[0] field '.size' should be int, found str");
  EXPECT_EQ(refusal("\xc1").rfind("bad AMDGPU metadata: not a msgpack document (", 0), 0u);
  auto empty = ukdpack::amdgpuNoteMetadata("\x80");  // {}: no target, no kernels
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty.value().target);
  EXPECT_TRUE(empty.value().kernels.empty());
}
