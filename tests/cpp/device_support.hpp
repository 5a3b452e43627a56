// Device plans on a host: a recording test double of DeviceBackend that keeps
// every call, a packed sm_90 shard of the committed cubins and the handlers
// that run its split kernels. Shared by the device plan and slot program tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/base/sha256.hpp"
#include "ukdpack/device/execution.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace devtest {

using ukdpack::DescriptorSet;
using ukdpack::DevicePtr;
using ukdpack::Registry;
using ukdpack::Result;
using ukdpack::Signature;
using ukdpack::StateManager;
using ukdtest::dump;
using ukdtest::Json;
using ukdtest::TempTree;

// ------------------------------------------------------------------ recording backend

// Keeps every call; hands out fake addresses; can be told to fail one call.
class RecordingBackend : public ukdpack::DeviceBackend {
 public:
  struct Launch {
    std::string symbol;
    ukdpack::LaunchGeometry geometry;
    std::vector<std::vector<std::uint8_t>> args;
  };

  explicit RecordingBackend(std::string name = "cuda", std::string arch = "sm_90")
      : name_(std::move(name)), arch_(std::move(arch)) {}

  const std::string& name() const override { return name_; }
  const std::string& arch() const override { return arch_; }
  int device() const override { return 0; }

  Result<ukdpack::ModuleHandle> loadModule(const std::uint8_t* image, std::size_t size) override {
    if (failing == "load") return Result<ukdpack::ModuleHandle>::failure(error("loadModule"));
    images.emplace_back(image, image + size);
    events.push_back("load " + std::to_string(images.size()));
    return Result<ukdpack::ModuleHandle>::success(ukdpack::ModuleHandle{images.size()});
  }
  Result<bool> unloadModule(ukdpack::ModuleHandle module) override {
    events.push_back("unload " + std::to_string(module.value));
    ++unloads;
    return ok();
  }
  Result<ukdpack::FunctionHandle> function(ukdpack::ModuleHandle module, const std::string& symbol) override {
    if (failing == "function " + symbol) return Result<ukdpack::FunctionHandle>::failure(error("function"));
    symbols.push_back(symbol);
    events.push_back("function " + std::to_string(module.value) + " " + symbol);
    return Result<ukdpack::FunctionHandle>::success(ukdpack::FunctionHandle{symbols.size()});
  }
  Result<DevicePtr> allocate(std::size_t bytes) override {
    next += 0x10000;
    allocations[next] = bytes;
    events.push_back("allocate " + std::to_string(bytes));
    return Result<DevicePtr>::success(next);
  }
  Result<bool> free(DevicePtr ptr) override {
    allocations.erase(ptr);
    events.push_back("free");
    return ok();
  }
  Result<bool> copyToDevice(DevicePtr, const void*, std::size_t bytes) override {
    events.push_back("upload " + std::to_string(bytes));
    return ok();
  }
  Result<bool> copyToHost(void* dst, DevicePtr, std::size_t bytes) override {
    std::memset(dst, 0xab, bytes);
    events.push_back("download " + std::to_string(bytes));
    return ok();
  }
  Result<bool> fill(DevicePtr, std::uint8_t value, std::size_t bytes) override {
    events.push_back("fill " + std::to_string(value) + " " + std::to_string(bytes));
    return ok();
  }
  Result<bool> launch(ukdpack::FunctionHandle f, const ukdpack::LaunchGeometry& g,
                      const ukdpack::KernelArgs& a) override {
    const std::string& symbol = symbols.at(f.value - 1);
    if (failing == "launch " + symbol) return Result<bool>::failure(error("launch"));
    Launch l{symbol, g, {}};
    for (std::size_t i = 0; i < a.count(); ++i) {
      const auto* p = static_cast<const std::uint8_t*>(a.data(i));
      l.args.emplace_back(p, p + a.size(i));
    }
    launches.push_back(std::move(l));
    events.push_back("launch " + symbol);
    return ok();
  }
  Result<bool> synchronize() override {
    if (failing == "synchronize") return Result<bool>::failure(error("synchronize"));
    events.push_back("synchronize");
    return ok();
  }

  std::string failing;  // "load", "function <symbol>", "launch <symbol>", "synchronize"
  std::vector<std::string> events;
  std::vector<std::vector<std::uint8_t>> images;
  std::vector<std::string> symbols;
  std::vector<Launch> launches;
  std::map<DevicePtr, std::size_t> allocations;
  int unloads = 0;

 private:
  static Result<bool> ok() { return Result<bool>::success(true); }
  ukdpack::Diagnostic error(const std::string& call) const {
    return ukdpack::makeError("DEVICE_ERROR", "", "", "test device: " + call + " failed: TEST_ERROR (told to)");
  }
  std::string name_;
  std::string arch_;
  DevicePtr next = 0x7000000;
};

inline DevicePtr pointerArg(const std::vector<std::uint8_t>& bytes) {
  DevicePtr p = 0;
  EXPECT_EQ(bytes.size(), sizeof p);
  if (bytes.size() == sizeof p) std::memcpy(&p, bytes.data(), sizeof p);
  return p;
}

// ------------------------------------------------------------------ the shard

inline const char* const kTocA = "split_kv_aaaaaaaaaaaa";
inline const char* const kTocB = "split_kv_bbbbbbbbbbbb";
inline const char* const kSymbol = "split_dispatch";
inline const char* const kSingleSymbol = "single_dispatch";

struct SplitParams {
  unsigned n;
  unsigned splits;
  float scale;
};

// What a run of the split kernels is given (the handler's own argument type).
struct SplitArgs {
  DevicePtr q = 0, k = 0, out = 0;
  SplitParams params{4096, 16, 0.5f};
};

inline Json arg(std::size_t size, std::size_t offset) {
  return {{"kind", "by_value"}, {"size", size}, {"offset", offset}};
}

// CUDA passes every parameter by value: the packer records cubin signatures so.
inline Json produceSignature() { return Json::array({arg(8, 0), arg(8, 8), arg(8, 16), arg(12, 24)}); }
inline Json consumeSignature() { return Json::array({arg(8, 0), arg(8, 8), arg(12, 16)}); }

inline Signature signatureOf(const Json& j) {
  Signature sig;
  for (const Json& a : j) {
    ukdpack::SignatureArg s;
    s.kind = a["kind"];
    s.size = a["size"];
    s.offset = a["offset"];
    sig.push_back(s);
  }
  return sig;
}

// KPAK entries of another type than the test writer's "hsaco": the names are
// the same length, so the msgpack TOC (written last) is patched in place.
inline std::vector<std::uint8_t> retyped(std::vector<std::uint8_t> kpack, const std::string& type) {
  std::uint64_t toc = 0;
  for (int i = 7; i >= 0; --i) toc = toc << 8 | kpack[8 + i];
  const std::string from = "hsaco";
  for (std::size_t i = toc; i + from.size() <= kpack.size(); ++i) {
    if (std::equal(from.begin(), from.end(), kpack.begin() + static_cast<std::ptrdiff_t>(i))) {
      std::copy(type.begin(), type.end(), kpack.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return kpack;
}

// A packed sm_90 shard: kpack/kernels_sm_90.kpack with the cubin (toc A) and
// its -rdc twin (toc B); ops/split.kdp.json with split.f32 (produce and
// consume from toc A), split.mixed (consume from toc B) and, in another pack,
// a single-launch kernel.
struct Shard {
  TempTree tree;
  std::vector<std::uint8_t> cubin = ukdtest::readBytes(ukdtest::testData("data/objects/split_kv.sm_90.cubin"));
  std::vector<std::uint8_t> rdc = ukdtest::readBytes(ukdtest::testData("data/objects/split_kv.sm_90.rdc.cubin"));
  std::string shaA = ukdpack::sha256Hex(cubin);
  std::string shaB = ukdpack::sha256Hex(rdc);
  Json split, mixed, single;

  Shard() {
    tree.writeBytes("kpack/kernels_sm_90.kpack",
                    retyped(ukdtest::makeKpack({{kTocA, "sm_90", cubin}, {kTocB, "sm_90", rdc}}), "cubin"));
    ukdtest::writeGenerics(tree, ukdtest::udd("udd-1", kSymbol, std::vector<std::string>{"produce", "consume"}));
    tree.write("ops/one.udd.json", ukdtest::udd("udd-2", kSingleSymbol));
    split = kernel("ukd-split", "split.f32", source("split_kv_produce", kTocA, shaA, produceSignature()),
                   source("split_kv_consume", kTocA, shaA, consumeSignature()));
    mixed = kernel("ukd-mixed", "split.mixed", source("split_kv_produce", kTocA, shaA, produceSignature()),
                   source("split_kv_consume", kTocB, shaB, consumeSignature()));
    single = {{"id", "ukd-one"},
              {"version", "1.0"},
              {"name", "unused.sm90"},
              {"priority", 0},
              {"metadata", {{"dtype", "HALF"}}},
              {"kernel_source", source("split_kv_unused", kTocA, shaA, Json::array())}};
    write();
  }
  static Json source(const std::string& symbol, const std::string& toc, const std::string& sha, const Json& sig) {
    return {{"kind", "kpack"}, {"library", "../kpack/kernels_sm_90.kpack"},
            {"toc_key", toc},  {"symbol", symbol},
            {"sha256", sha},   {"signature", sig}};
  }
  static Json kernel(const std::string& id, const std::string& name, const Json& produce, const Json& consume) {
    return {{"id", id},
            {"version", "1.1"},
            {"name", name},
            {"priority", 0},
            {"metadata", {{"dtype", name}}},
            {"sources", {{"produce", produce}, {"consume", consume}}}};
  }
  void write() const {
    tree.write("ops/split.kdp.json",
               ukdtest::kdp("kdp-split", Json::array({split, mixed}), "udd-1", "ued-1", {"sm_90"}));
    tree.write("ops/one.kdp.json", ukdtest::kdp("kdp-one", Json::array({single}), "udd-2", "ued-1", {"sm_90"}));
  }
  DescriptorSet load() const {
    DescriptorSet set = ukdpack::loadShard(tree.root());
    EXPECT_TRUE(set.ok()) << dump(set.diagnostics);
    return set;
  }
};

// The split kernels' handler: produce then consume (not sorted order) over a
// workspace of one float per split.
class SplitHandler : public ukdpack::DispatchHandler {
 public:
  std::vector<std::string> launchNames() const override { return {"produce", "consume"}; }
  std::size_t workspaceSize(const ukdpack::Kernel&) const override { return 16 * sizeof(float); }
  std::optional<Signature> expectedSignature(const std::string& launch) const override {
    if (launch == "produce") return signatureOf(produceWanted);
    if (launch == "consume") return signatureOf(consumeSignature());
    return std::nullopt;
  }
  Result<bool> prepareLaunch(const ukdpack::LaunchContext& c, ukdpack::LaunchArgs& out) const override {
    const auto& a = *static_cast<const SplitArgs*>(c.arguments);
    seen.push_back(std::string(c.launch));
    if (c.launch == "produce") {
      out.geometry.grid = {a.params.splits, 1, 1};
      out.geometry.block = {256, 1, 1};
      out.args.addPointer(a.q).addPointer(a.k).addPointer(c.workspace).addValue(a.params);
      if (extraArgument) out.args.addValue(0u);
    } else {
      out.geometry.block = {1, 1, 1};
      out.geometry.sharedBytes = 64;
      out.args.addPointer(c.workspace).addPointer(a.out).addValue(a.params);
    }
    return Result<bool>::success(true);
  }

  Json produceWanted = produceSignature();
  bool extraArgument = false;
  mutable std::vector<std::string> seen;
};

class SingleHandler : public ukdpack::DispatchHandler {
 public:
  std::vector<std::string> launchNames() const override { return {}; }
  Result<bool> prepareLaunch(const ukdpack::LaunchContext& c, ukdpack::LaunchArgs& out) const override {
    seen.push_back(std::string(c.launch));
    workspace = c.workspace;
    out.geometry.grid = {1, 1, 1};
    return Result<bool>::success(true);
  }
  mutable std::vector<std::string> seen;
  mutable DevicePtr workspace = 1;
};

struct Fixture {
  Shard shard;
  std::shared_ptr<SplitHandler> split = std::make_shared<SplitHandler>();
  std::shared_ptr<SingleHandler> single = std::make_shared<SingleHandler>();
  std::shared_ptr<RecordingBackend> backend = std::make_shared<RecordingBackend>();

  StateManager manager(const std::string& arch = "sm_90") const {
    Registry r;
    r.addDispatch(kSymbol, split);
    r.addDispatch(kSingleSymbol, single);
    r.addMatcher("eng_match", std::make_shared<ukdpack::MatchHandler>());
    StateManager sm(shard.load(), r, arch);
    EXPECT_TRUE(sm.dropped().empty()) << dump(sm.diagnostics());
    return sm;
  }
};

}  // namespace devtest
