// Device plans on a host: a packed sm_90 shard of the committed cubins, run
// through a recording test double of DeviceBackend that keeps every call. The
// real backends run the same plans on a GPU (tests/device/).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "device_support.hpp"
#include "ukdpack/plan/plan.hpp"

using ukdpack::DevicePlan;
using namespace devtest;  // NOLINT(google-build-using-namespace): the shared fixture's names, as they read here

namespace {

std::string failureOf(const Result<DevicePlan>& r) {
  return r ? std::string("<created>") : r.error().code + ": " + r.error().str();
}

}  // namespace

TEST(DevicePlan, RunsTheLaunchesInTheHandlersOrderOverOneWorkspace) {
  Fixture s;
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  DevicePlan plan = std::move(made).value();
  EXPECT_EQ(plan.launchNames(), (std::vector<std::string>{"produce", "consume"}));
  EXPECT_EQ(plan.workspaceSize(), 64u);
  EXPECT_EQ(plan.arch(), "sm_90");
  // Both launches come from one code object: one module, both symbols resolved in it.
  EXPECT_EQ(plan.moduleCount(), 1u);
  ASSERT_EQ(s.backend->images.size(), 1u);
  EXPECT_EQ(s.backend->images[0], s.shard.cubin);
  EXPECT_EQ(s.backend->events,
            (std::vector<std::string>{"load 1", "function 1 split_kv_produce", "function 1 split_kv_consume"}));

  SplitArgs args;
  args.q = 0x100;
  args.k = 0x200;
  args.out = 0x300;
  for (int run = 0; run < 3; ++run) {
    auto ran = plan.run(&args);
    ASSERT_TRUE(ran) << ran.error().str();
  }
  // One workspace, allocated at the first run and used by every launch of every run.
  ASSERT_EQ(s.backend->allocations.size(), 1u);
  const DevicePtr workspace = s.backend->allocations.begin()->first;
  EXPECT_EQ(s.backend->allocations.begin()->second, 64u);
  const std::vector<std::string> oneRun = {"launch split_kv_produce", "launch split_kv_consume", "synchronize"};
  std::vector<std::string> expected = {"load 1", "function 1 split_kv_produce", "function 1 split_kv_consume",
                                       "allocate 64"};
  for (int run = 0; run < 3; ++run) expected.insert(expected.end(), oneRun.begin(), oneRun.end());
  EXPECT_EQ(s.backend->events, expected);
  ASSERT_EQ(s.backend->launches.size(), 6u);
  for (std::size_t i = 0; i < 6; i += 2) {
    const auto& produce = s.backend->launches[i];
    const auto& consume = s.backend->launches[i + 1];
    EXPECT_EQ(produce.symbol, "split_kv_produce");
    EXPECT_EQ(consume.symbol, "split_kv_consume");
    ASSERT_EQ(produce.args.size(), 4u);
    ASSERT_EQ(consume.args.size(), 3u);
    EXPECT_EQ(pointerArg(produce.args[0]), 0x100u);
    EXPECT_EQ(pointerArg(produce.args[1]), 0x200u);
    EXPECT_EQ(pointerArg(produce.args[2]), workspace);
    EXPECT_EQ(pointerArg(consume.args[0]), workspace);
    EXPECT_EQ(pointerArg(consume.args[1]), 0x300u);
    SplitParams p{};
    ASSERT_EQ(consume.args[2].size(), sizeof p);
    std::memcpy(&p, consume.args[2].data(), sizeof p);
    EXPECT_EQ(p.n, 4096u);
    EXPECT_EQ(p.splits, 16u);
    EXPECT_EQ(produce.geometry.grid.x, 16u);
    EXPECT_EQ(produce.geometry.block.x, 256u);
    EXPECT_EQ(consume.geometry.grid.x, 1u);
    EXPECT_EQ(consume.geometry.sharedBytes, 64u);
  }
  EXPECT_EQ(s.split->seen,
            (std::vector<std::string>{"produce", "consume", "produce", "consume", "produce", "consume"}));
}

TEST(DevicePlan, ACallersWorkspaceIsUsedAndCheckedForSize) {
  Fixture s;
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  DevicePlan plan = std::move(made).value();
  auto buffer = ukdpack::DeviceBuffer::allocate(s.backend, 128);
  ASSERT_TRUE(buffer);
  SplitArgs args;
  ASSERT_TRUE(plan.run(buffer.value().ptr(), buffer.value().size(), &args));
  EXPECT_EQ(pointerArg(s.backend->launches.at(0).args.at(2)), buffer.value().ptr());
  EXPECT_EQ(pointerArg(s.backend->launches.at(1).args.at(0)), buffer.value().ptr());
  EXPECT_EQ(s.backend->allocations.size(), 1u) << "the plan allocated none of its own";

  auto small = plan.run(buffer.value().ptr(), 32, &args);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, "WORKSPACE_TOO_SMALL");
  EXPECT_EQ(small.error().message,
            "kernel 'split.f32' (id ukd-split) needs a workspace of 64 bytes, the run was given 32 bytes");
  auto none = plan.run(0, 0, &args);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, "WORKSPACE_TOO_SMALL");
  EXPECT_EQ(s.backend->launches.size(), 2u) << "nothing launched for the refused runs";
}

TEST(DevicePlan, LaunchesOfDistinctCodeObjectsGetOneModuleEach) {
  Fixture s;
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-mixed", s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  const DevicePlan& plan = made.value();
  EXPECT_EQ(plan.moduleCount(), 2u);
  ASSERT_EQ(s.backend->images.size(), 2u);
  EXPECT_EQ(s.backend->images[0], s.shard.cubin);
  EXPECT_EQ(s.backend->images[1], s.shard.rdc);
  EXPECT_EQ(plan.launches().at(0).module, 0u);
  EXPECT_EQ(plan.launches().at(1).module, 1u);
  EXPECT_EQ(plan.launches().at(1).tocKey, kTocB);
  EXPECT_EQ(plan.launches().at(1).sha256, s.shard.shaB);
}

TEST(DevicePlan, ModulesAreUnloadedWithThePlan) {
  Fixture s;
  {
    const StateManager sm = s.manager();
    auto made = DevicePlan::create(sm, "ukd-mixed", s.backend);
    ASSERT_TRUE(made) << failureOf(made);
    DevicePlan moved = std::move(made).value();
    EXPECT_EQ(s.backend->unloads, 0);
  }
  EXPECT_EQ(s.backend->unloads, 2);
}

TEST(DevicePlan, ASingleLaunchKernelRunsItsOneUnnamedLaunch) {
  Fixture s;
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-one", s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  DevicePlan plan = std::move(made).value();
  EXPECT_EQ(plan.launchNames(), (std::vector<std::string>{""}));
  EXPECT_EQ(plan.workspaceSize(), 0u);
  ASSERT_TRUE(plan.run());
  EXPECT_EQ(s.single->seen, (std::vector<std::string>{""}));
  EXPECT_EQ(s.single->workspace, 0u) << "no workspace: none allocated";
  EXPECT_TRUE(s.backend->allocations.empty());
  ASSERT_EQ(s.backend->launches.size(), 1u);
  EXPECT_EQ(s.backend->launches[0].symbol, "split_kv_unused");
  EXPECT_TRUE(s.backend->launches[0].args.empty());
}

TEST(DevicePlan, ADigestMismatchRefusesThePlanNamingKernelAndLaunch) {
  Fixture s;
  std::string wrong = s.shard.shaA;
  wrong[5] = wrong[5] == '0' ? '1' : '0';
  s.shard.split["sources"]["consume"]["sha256"] = wrong;
  s.shard.write();
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, "DIGEST_MISMATCH");
  EXPECT_NE(made.error().message.find("kernel 'split.f32' (id ukd-split) launch 'consume'"), std::string::npos)
      << made.error().str();
  EXPECT_EQ(made.error().jsonPath, "$.kernelDescriptors[0].sources.consume.sha256");
  // produce's module was loaded before consume failed, and went with the refused plan.
  EXPECT_EQ(s.backend->images.size(), 1u);
  EXPECT_EQ(s.backend->unloads, 1);
  EXPECT_TRUE(s.backend->launches.empty());
}

TEST(DevicePlan, ASignatureMismatchRefusesThePlanBeforeAnyCodeLoads) {
  Fixture s;
  s.split->produceWanted = Json::array({arg(8, 0), arg(8, 8), arg(8, 16)});
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, "SIGNATURE_MISMATCH");
  EXPECT_NE(made.error().message.find("kernel 'split.f32' (id ukd-split) launch 'produce'"), std::string::npos)
      << made.error().str();
  EXPECT_NE(made.error().message.find("the handler passes 3 arguments, the kernel takes 4"), std::string::npos)
      << made.error().str();
  EXPECT_TRUE(s.backend->images.empty());
}

TEST(DevicePlan, ASymbolTheCubinLacksRefusesThePlan) {
  Fixture s;
  s.shard.split["sources"]["consume"]["symbol"] = "split_kv_finish";
  s.shard.write();
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, "SYMBOL_MISSING");
  EXPECT_NE(made.error().message.find("kernel 'split.f32' (id ukd-split) launch 'consume'"), std::string::npos);
  EXPECT_NE(made.error().message.find("it holds split_kv_consume, split_kv_produce, split_kv_unused"),
            std::string::npos)
      << made.error().str();
}

TEST(DevicePlan, BackendFailuresAtCreationNameKernelLaunchAndCall) {
  for (const std::string failing : {"load", "function split_kv_consume"}) {
    Fixture s;
    s.backend->failing = failing;
    const StateManager sm = s.manager();
    auto made = DevicePlan::create(sm, "ukd-split", s.backend);
    ASSERT_FALSE(made) << failing;
    EXPECT_EQ(made.error().code, "DEVICE_ERROR");
    const std::string& m = made.error().message;
    if (failing == "load") {
      EXPECT_EQ(m,
                "kernel 'split.f32' (id ukd-split) launch 'produce': cannot load its code object (toc key "
                "'split_kv_aaaaaaaaaaaa'): test device: loadModule failed: TEST_ERROR (told to)");
    } else {
      EXPECT_EQ(
          m,
          "kernel 'split.f32' (id ukd-split) launch 'consume': cannot resolve symbol 'split_kv_consume': test device: "
          "function failed: TEST_ERROR (told to)");
    }
    EXPECT_EQ(made.error().file, "ops/split.kdp.json");
  }
}

TEST(DevicePlan, RunFailuresNameKernelAndLaunch) {
  Fixture s;
  const StateManager sm = s.manager();
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  DevicePlan plan = std::move(made).value();
  SplitArgs args;

  s.backend->failing = "launch split_kv_consume";
  auto launch = plan.run(&args);
  ASSERT_FALSE(launch);
  EXPECT_EQ(launch.error().code, "DEVICE_ERROR");
  EXPECT_EQ(launch.error().message,
            "kernel 'split.f32' (id ukd-split) launch 'consume': launching 'split_kv_consume' failed: "
            "test device: launch failed: TEST_ERROR (told to)");

  s.backend->failing = "synchronize";
  auto sync = plan.run(&args);
  ASSERT_FALSE(sync);
  EXPECT_EQ(sync.error().message,
            "kernel 'split.f32' (id ukd-split): waiting for its launches {consume, produce} failed: test "
            "device: synchronize failed: TEST_ERROR (told to)");

  s.backend->failing.clear();
  s.split->extraArgument = true;
  auto extra = plan.run(&args);
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().code, "LAUNCH_ARGUMENTS");
  EXPECT_NE(extra.error().message.find(
                "kernel 'split.f32' (id ukd-split) launch 'produce': the handler passes 5 arguments (8, 8, "
                "8, 12, 4 bytes)"),
            std::string::npos)
      << extra.error().message;
  EXPECT_NE(extra.error().message.find("takes 4 (8, 8, 8, 12 bytes)"), std::string::npos) << extra.error().message;
}

TEST(DevicePlan, AHandlerThatOnlyDeclaresCannotRunNamingKernelAndLaunch) {
  Fixture s;
  Registry r;
  r.addDispatch(kSymbol,
                std::make_shared<ukdpack::DeclaredDispatchHandler>(std::vector<std::string>{"produce", "consume"}));
  r.addDispatch(kSingleSymbol, s.single);
  const StateManager sm(s.shard.load(), r, "sm_90");
  auto made = DevicePlan::create(sm, "ukd-split", s.backend);
  ASSERT_TRUE(made) << failureOf(made);  // code loads and resolves; running needs prepareLaunch
  DevicePlan plan = std::move(made).value();
  auto ran = plan.run();
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.error().code, "NOT_EXECUTABLE");
  EXPECT_EQ(ran.error().message.rfind(
                "kernel 'split.f32' (id ukd-split) launch 'produce': dispatch symbol 'split_dispatch' did "
                "not prepare the launch: ",
                0),
            0u)
      << ran.error().message;
}

TEST(DevicePlan, TheDevicesArchAndKindMustFitTheKernel) {
  Fixture s;
  const StateManager every = s.manager("");  // the manager keeps every arch; the device decides
  auto other = DevicePlan::create(every, "ukd-split", std::make_shared<RecordingBackend>("cuda", "sm_80"));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, "ARCH_MISMATCH");
  EXPECT_EQ(other.error().message,
            "kernel 'split.f32' (id ukd-split) does not run on sm_80 (the cuda device): it is built for sm_90");
  auto amd = DevicePlan::create(every, "ukd-split", std::make_shared<RecordingBackend>("hip", "sm_90"));
  ASSERT_FALSE(amd);
  EXPECT_EQ(amd.error().code, "CODE_OBJECT_WRONG_BACKEND");
  EXPECT_NE(amd.error().message.find("is an NVIDIA cubin, which the hip backend cannot load"), std::string::npos);
  // A dropped kernel's plan says why it was dropped.
  Registry fewer;
  fewer.addDispatch(kSymbol, std::make_shared<ukdpack::DeclaredDispatchHandler>(std::vector<std::string>{"produce"}));
  const StateManager dropping(s.shard.load(), fewer, "sm_90");
  auto dropped = DevicePlan::create(dropping, "ukd-split", s.backend);
  ASSERT_FALSE(dropped);
  EXPECT_EQ(dropped.error().code, "KERNEL_UNKNOWN");
  EXPECT_EQ(dropped.error().message,
            "kernel 'split.f32' (id ukd-split) was dropped: dispatch symbol 'split_dispatch' declares "
            "launches {produce}, the kernel has {consume, produce}");
  auto unknown = DevicePlan::create(every, "ukd-404", s.backend);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, "KERNEL_UNKNOWN");
  auto none = DevicePlan::create(every, "ukd-split", nullptr);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, "PLAN_NO_BACKEND");
  // An explicit arch overrides the backend's.
  auto named = DevicePlan::create(every, "ukd-split", std::make_shared<RecordingBackend>("cuda", "sm_80"), "sm_90");
  EXPECT_TRUE(named) << failureOf(named);
}

// --------------------------------------------------------------------------- RAII owners

TEST(DeviceBuffer, FreesOnceAndChecksBounds) {
  auto backend = std::make_shared<RecordingBackend>();
  {
    auto made = ukdpack::DeviceBuffer::allocate(backend, 32);
    ASSERT_TRUE(made);
    ukdpack::DeviceBuffer a = std::move(made).value();
    EXPECT_EQ(a.size(), 32u);
    ukdpack::DeviceBuffer b = std::move(a);
    EXPECT_EQ(a.ptr(), 0u);
    std::vector<std::uint8_t> data(16, 1);
    EXPECT_TRUE(b.upload(data.data(), 16, 16));
    auto past = b.upload(data.data(), 16, 17);
    ASSERT_FALSE(past);
    EXPECT_EQ(past.error().code, "DEVICE_BOUNDS");
    EXPECT_EQ(past.error().message, "cannot upload 16 bytes at offset 17: the device buffer holds 32 bytes");
    EXPECT_TRUE(b.download(data.data(), 16));
    EXPECT_EQ(data[0], 0xab);
    EXPECT_TRUE(b.zero());
  }
  EXPECT_EQ(backend->events,
            (std::vector<std::string>{"allocate 32", "upload 16", "download 16", "fill 0 32", "free"}));
  auto empty = ukdpack::DeviceBuffer::allocate(backend, 0);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty.value().ptr(), 0u);
  EXPECT_TRUE(empty.value().zero());
  EXPECT_EQ(backend->events.size(), 5u) << "an empty buffer needs no driver call";
}
