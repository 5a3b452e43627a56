// A consuming library's use of a packed shard, end to end (docs/cpp-consumer.md):
// load the shard, register the library's dispatch handlers and matcher, build the
// state manager, select a kernel per problem, plan its launches and get the
// verified code of each. With a GPU the HIP backend is there and both plans run;
// without one the program stops short of launching and says so.
//
//   cpp_consumer SHARD [ARCH]     (ARCH: the device arch; default: SHARD's folder name)
//
// Exit 0 when every step worked, 1 with one "error:" line per problem otherwise.
// Every runtime call returns a result (ukdpack::Result or diagnostics): nothing throws.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ukdpack/device/execution.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace {

// What the library passes its handlers as a launch's `arguments`: device buffers
// and sizes (handler-defined; the runtime only hands the pointer through).
struct Operands {
  ukdpack::DevicePtr in = 0;
  ukdpack::DevicePtr out = 0;
  float alpha = 1.0f;
  unsigned n = 0;
};

constexpr unsigned kBlock = 256;            // the kernels' block size (BLOCK in the .hip files)
constexpr unsigned kMaxElements = 1 << 16;  // the workspace is sized for this many inputs

ukdpack::SignatureArg buffer(std::uint64_t offset) { return {"global_buffer", 8, offset, std::nullopt}; }
ukdpack::SignatureArg value(std::uint64_t offset) { return {"by_value", 4, offset, std::nullopt}; }

// example_kernels_scale_dispatch: one launch, out[i] = in[i] * alpha.
class ScaleHandler : public ukdpack::DispatchHandler {
 public:
  std::vector<std::string> launchNames() const override { return {}; }  // single launch
  std::optional<ukdpack::Signature> expectedSignature(const std::string&) const override {
    return ukdpack::Signature{buffer(0), buffer(8), value(16), value(20)};  // in, out, alpha, n
  }
  ukdpack::Result<bool> prepareLaunch(const ukdpack::LaunchContext& context, ukdpack::LaunchArgs& out) const override {
    const auto& op = *static_cast<const Operands*>(context.arguments);
    out.geometry.grid.x = (op.n + kBlock - 1) / kBlock;
    out.geometry.block.x = kBlock;
    out.args.addPointer(op.in).addPointer(op.out).addValue(op.alpha).addValue(op.n);
    return ukdpack::Result<bool>::success(true);
  }
};

// example_kernels_twostage_dispatch: "partial" sums each block into the
// workspace, "combine" adds the partial sums: two launches, one workspace.
class TwoStageHandler : public ukdpack::DispatchHandler {
 public:
  std::vector<std::string> launchNames() const override { return {"partial", "combine"}; }
  std::size_t workspaceSize(const ukdpack::Kernel&) const override {
    return (kMaxElements / kBlock) * sizeof(float);  // one partial sum per block
  }
  std::optional<ukdpack::Signature> expectedSignature(const std::string&) const override {
    // partial(in, workspace, n) and combine(workspace, out, blocks): the same shape.
    return ukdpack::Signature{buffer(0), buffer(8), value(16)};
  }
  ukdpack::Result<bool> prepareLaunch(const ukdpack::LaunchContext& context, ukdpack::LaunchArgs& out) const override {
    const auto& op = *static_cast<const Operands*>(context.arguments);
    const unsigned blocks = (op.n + kBlock - 1) / kBlock;
    if (context.launch == "partial") {
      out.geometry.grid.x = blocks;
      out.geometry.block.x = kBlock;
      out.args.addPointer(op.in).addPointer(context.workspace).addValue(op.n);
    } else {
      out.args.addPointer(context.workspace).addPointer(op.out).addValue(blocks);
    }
    return ukdpack::Result<bool>::success(true);
  }
};

// example_kernels_match: a kernel serves a problem of its own "op" and "dtype".
class OpMatcher : public ukdpack::MatchHandler {
 public:
  ukdpack::Result<bool> matches(const ukdpack::Kernel& kernel, const ukdpack::Json& problem) const override {
    if (!problem.is_object()) {
      return ukdpack::Result<bool>::failure(
          ukdpack::makeError("BAD_PROBLEM", "", "", "expected a problem object, found " + problem.dump()));
    }
    for (const char* field : {"op", "dtype"}) {
      if (problem.value(field, ukdpack::Json()) != kernel.metadata.value(field, ukdpack::Json())) {
        return ukdpack::Result<bool>::success(false);
      }
    }
    return ukdpack::Result<bool>::success(true);
  }
};

int fail(const ukdpack::Diagnostic& d) {
  std::fprintf(stderr, "error: %s\n", d.str().c_str());
  return 1;
}

// The symbol a launch runs ("" names the single launch).
std::string symbolOf(const ukdpack::Kernel& kernel, const std::string& launch) {
  const ukdpack::KernelSource* source =
      launch.empty() ? ukdpack::singleLaunchSource(kernel) : &kernel.sources.at(launch);
  return source != nullptr ? source->symbol : "";
}

// Runs a plan on the GPU: uploads `input`, runs every launch, returns `outputs` floats.
ukdpack::Result<std::vector<float>> runOnDevice(const ukdpack::StateManager& manager, const std::string& kernelId,
                                                const std::shared_ptr<ukdpack::DeviceBackend>& backend,
                                                const std::vector<float>& input, float alpha, std::size_t outputs) {
  using R = ukdpack::Result<std::vector<float>>;
  auto plan = ukdpack::DevicePlan::create(manager, kernelId, backend);
  if (!plan) return R::failure(plan.error());
  auto in = ukdpack::DeviceBuffer::allocate(backend, input.size() * sizeof(float));
  auto out = ukdpack::DeviceBuffer::allocate(backend, outputs * sizeof(float));
  if (!in) return R::failure(in.error());
  if (!out) return R::failure(out.error());
  if (auto up = in.value().upload(input.data(), input.size() * sizeof(float)); !up) return R::failure(up.error());
  const Operands op{in.value().ptr(), out.value().ptr(), alpha, static_cast<unsigned>(input.size())};
  if (auto ran = plan.value().run(&op); !ran) return R::failure(ran.error());
  std::vector<float> result(outputs);
  if (auto down = out.value().download(result.data(), outputs * sizeof(float)); !down) {
    return R::failure(down.error());
  }
  return R::success(std::move(result));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: cpp_consumer SHARD [ARCH]\n");
    return 2;
  }
  const std::filesystem::path shard = argv[1];
  const std::string arch = argc == 3 ? argv[2] : shard.filename().string();

  // 1. Load the shard. The set carries a diagnostic for everything that did not
  //    load; an error (a damaged file, an out root for OUT_ROOT/<arch>) fails here.
  ukdpack::DescriptorSet set = ukdpack::loadShard(shard);
  if (!set.ok()) {
    for (const ukdpack::Diagnostic& d : set.diagnostics)
      if (d.severity == ukdpack::Severity::Error) fail(d);
    return 1;
  }
  std::size_t kernels = 0;
  for (const ukdpack::Pack& p : set.packs) kernels += p.members.size();
  std::printf("loaded %s: %zu packs, %zu kernels\n", shard.string().c_str(), set.packs.size(), kernels);

  // 2. Register the library's handlers under the symbols its descriptors name
  //    (a UDD's dispatch_symbol, a UMD's match_symbol).
  ukdpack::Registry registry;
  for (auto added : {registry.addDispatch("example_kernels_scale_dispatch", std::make_shared<ScaleHandler>()),
                     registry.addDispatch("example_kernels_twostage_dispatch", std::make_shared<TwoStageHandler>()),
                     registry.addMatcher("example_kernels_match", std::make_shared<OpMatcher>())}) {
    if (!added) return fail(added.error());
  }

  // 3. The state manager keeps the kernels the handlers can serve on this arch and
  //    says why it drops each other one (an unknown symbol, another launch set).
  const ukdpack::StateManager manager(std::move(set), registry, arch);
  for (const ukdpack::Diagnostic& d : manager.diagnostics()) std::fprintf(stderr, "%s\n", d.str().c_str());
  std::printf("state manager for %s: %zu kernels kept, %zu dropped\n", arch.c_str(), manager.kept().size(),
              manager.dropped().size());
  if (!manager.dropped().empty() || manager.kept().empty()) {
    std::fprintf(stderr, "error: the shard holds kernels these handlers cannot serve\n");
    return 1;
  }

  // A GPU when there is one: openHipBackend fails with DEVICE_UNAVAILABLE otherwise.
  auto backend = ukdpack::openHipBackend(0);
  if (!backend) std::printf("no GPU: %s; the plans are not run\n", backend.error().message.c_str());

  // 4. Per problem: select, plan, load the verified code of each launch (containment,
  //    toc entry, sha256, symbol and signature checked against the handler's).
  const std::vector<ukdpack::Json> problems = {{{"op", "scale"}, {"dtype", "FLOAT"}},
                                               {{"op", "sum"}, {"dtype", "FLOAT"}},
                                               {{"op", "softmax"}, {"dtype", "FLOAT"}}};
  for (const ukdpack::Json& problem : problems) {
    auto selected = manager.select(problem);
    if (!selected) return fail(selected.error());
    const ukdpack::KernelDefinition* chosen = selected.value();
    if (chosen == nullptr) {
      std::printf("%s: no kernel\n", problem.dump().c_str());
      continue;
    }
    const ukdpack::Kernel& kernel = *chosen->kernel();
    auto plan = ukdpack::makeExecutionPlan(manager, kernel.id);
    if (!plan) return fail(plan.error());
    std::printf("%s: kernel %s (pack %s, dispatch %s), %zu launch%s, workspace %zu bytes\n", problem.dump().c_str(),
                kernel.name.c_str(), chosen->pack->name.c_str(), chosen->dispatchSymbol().c_str(),
                plan.value().launches.size(), plan.value().launches.size() == 1 ? "" : "es",
                plan.value().workspaceSize);
    for (const std::string& launch : plan.value().launches) {
      const std::optional<std::string> name = launch.empty() ? std::nullopt : std::optional<std::string>(launch);
      auto code = manager.loadLaunchCode(kernel.id, name);
      if (!code) return fail(code.error());
      std::printf("  launch %s: symbol %s, %zu bytes of verified code\n", launch.empty() ? "(single)" : launch.c_str(),
                  symbolOf(kernel, launch).c_str(), code.value().size());
    }
    if (!backend) continue;

    // 5. On a GPU: run the plan (the DevicePlan loads the same verified code).
    std::vector<float> input(1000);
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 7);
    const bool scale = kernel.sources.empty();
    auto ran = runOnDevice(manager, kernel.id, backend.value(), input, 2.0f, scale ? input.size() : 1);
    if (!ran) return fail(ran.error());
    float expected = 0.0f;
    for (float x : input) expected += x;
    const float got = scale ? ran.value()[999] : ran.value()[0];
    const float want = scale ? input[999] * 2.0f : expected;
    std::printf("  ran on %s: got %g, expected %g\n", backend.value()->arch().c_str(), got, want);
    if (got != want) return 1;
  }
  return 0;
}
