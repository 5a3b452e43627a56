// Device slot programs on a host: the packed sm_90 shard of device_support.hpp
// as a slotted engine (prep: a single-launch kernel; split: the two-launch
// kernels; finish: another single-launch kernel), run through the recording
// backend. tests/device runs slot programs on a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_support.hpp"
#include "ukdpack/plan/slot_plan.hpp"
#include "ukdpack/select/slots.hpp"

using ukdpack::DeviceSlotProgram;
using namespace devtest;  // NOLINT(google-build-using-namespace): the shared fixture's names

namespace {

Json slotted(Json pack, const std::string& slot) {
  pack["version"] = "1.1";
  pack["slot"] = slot;
  return pack;
}

// The fixture's shard, its engine given slots prep, split and finish.
struct SlottedFixture : Fixture {
  SlottedFixture() {
    shard.tree.write("eng.ued.json",
                     Json{{"id", "ued-1"},
                          {"version", "1.1"},
                          {"name", "test:slotted"},
                          {"metadata", "kmd-1"},
                          {"slots", Json::array({{{"name", "prep"}}, {{"name", "split"}}, {{"name", "finish"}}})}});
    shard.split["priority"] = 1;  // the split slot's default pick; ukd-mixed is chosen
    Json finish = shard.single;
    finish["id"] = "ukd-fin";
    finish["name"] = "finish.sm90";
    finish["metadata"] = {{"dtype", "FIN"}};
    shard.tree.write("ops/split.kdp.json", slotted(ukdtest::kdp("kdp-split", Json::array({shard.split, shard.mixed}),
                                                                "udd-1", "ued-1", {"sm_90"}),
                                                   "split"));
    shard.tree.write(
        "ops/one.kdp.json",
        slotted(ukdtest::kdp("kdp-one", Json::array({shard.single}), "udd-2", "ued-1", {"sm_90"}), "prep"));
    shard.tree.write("ops/fin.kdp.json",
                     slotted(ukdtest::kdp("kdp-fin", Json::array({finish}), "udd-2", "ued-1", {"sm_90"}), "finish"));
  }
};

std::string failureOf(const Result<DeviceSlotProgram>& r) {
  return r ? std::string("<created>") : r.error().code + ": " + r.error().str();
}

}  // namespace

TEST(DeviceSlotProgram, RunsEveryPickInSlotOrderOverOneWorkspaceWithOneSynchronize) {
  SlottedFixture s;
  const StateManager sm = s.manager();
  auto program = ukdpack::makeSlotProgram(sm, "ued-1", Json::object());
  ASSERT_TRUE(program) << program.error().str();
  auto made = DeviceSlotProgram::create(sm, program.value(), s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  DeviceSlotProgram device = std::move(made).value();
  EXPECT_EQ(device.slots(), (std::vector<std::string>{"prep", "split", "finish"}));
  ASSERT_EQ(device.plans().size(), 3u);
  EXPECT_EQ(device.plans()[1].definition().kernel()->id, "ukd-split");
  EXPECT_EQ(device.plans()[1].launchNames(), (std::vector<std::string>{"produce", "consume"}));
  EXPECT_EQ(device.workspaceSize(), 64u);  // the split kernel's; the single ones need none
  EXPECT_EQ(device.engine().name, "test:slotted");

  SplitArgs args;
  args.q = 0x100;
  s.backend->events.clear();
  ASSERT_TRUE(device.run(&args));
  ASSERT_TRUE(device.run(&args));
  const std::vector<std::string> once{"launch split_kv_unused", "launch split_kv_produce", "launch split_kv_consume",
                                      "launch split_kv_unused", "synchronize"};
  std::vector<std::string> twice{"allocate 64"};
  twice.insert(twice.end(), once.begin(), once.end());
  twice.insert(twice.end(), once.begin(), once.end());
  EXPECT_EQ(s.backend->events, twice);  // one workspace, allocated once; one wait per run
  // Every slot saw the whole workspace: the single kernel's handler and the split kernel's arguments.
  ASSERT_EQ(s.backend->allocations.size(), 1u);
  const DevicePtr ws = s.backend->allocations.begin()->first;
  EXPECT_EQ(s.single->workspace, ws);
  EXPECT_EQ(pointerArg(s.backend->launches[1].args[2]), ws);
  EXPECT_EQ(pointerArg(s.backend->launches[1].args[0]), 0x100u);  // the same arguments reached the split kernel
  EXPECT_EQ(s.single->seen.size(), 4u);

  // A caller's workspace too small: refused before anything launches.
  s.backend->events.clear();
  auto small = device.run(0x9000, 32, &args);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, "WORKSPACE_TOO_SMALL");
  EXPECT_EQ(small.error().message,
            "the slot program of engine 'test:slotted' needs a workspace of 64 bytes (the largest of its slots': prep "
            "0, split 64, finish 0), the run was given 32 bytes");
  EXPECT_TRUE(s.backend->events.empty());
  ASSERT_TRUE(device.run(0x9000, 128, &args));
  ASSERT_EQ(s.backend->launches.size(), 12u);                      // three runs of four launches
  EXPECT_EQ(pointerArg(s.backend->launches[9].args[2]), 0x9000u);  // the third run's produce
  EXPECT_EQ(s.single->workspace, 0x9000u);
}

TEST(DeviceSlotProgram, AChosenPickIsPlannedAndAFailingPickPlansNothing) {
  SlottedFixture s;
  const StateManager sm = s.manager();
  auto mixed = ukdpack::makeSlotProgram(sm, "ued-1", Json::object(), {{"split", "ukd-mixed"}});
  ASSERT_TRUE(mixed) << mixed.error().str();
  auto made = DeviceSlotProgram::create(sm, mixed.value(), s.backend);
  ASSERT_TRUE(made) << failureOf(made);
  EXPECT_EQ(made.value().plans()[1].definition().kernel()->id, "ukd-mixed");
  EXPECT_EQ(made.value().plans()[1].moduleCount(), 2u);  // its launches come from two code objects

  SlottedFixture f;
  const StateManager failing = f.manager();
  f.backend->failing = "function split_kv_consume";
  auto program = ukdpack::makeSlotProgram(failing, "ued-1", Json::object());
  ASSERT_TRUE(program);
  auto refused = DeviceSlotProgram::create(failing, program.value(), f.backend);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "DEVICE_ERROR");
  EXPECT_EQ(refused.error().message.rfind("slot 'split' of engine 'test:slotted': ", 0), 0u) << refused.error().message;
  EXPECT_TRUE(f.backend->launches.empty());

  // On a device of another arch: refused naming the slot, nothing launched.
  auto other = std::make_shared<RecordingBackend>("cuda", "sm_80");
  auto wrongArch = DeviceSlotProgram::create(sm, mixed.value(), other);
  ASSERT_FALSE(wrongArch);
  EXPECT_EQ(wrongArch.error().code, "ARCH_MISMATCH");
  EXPECT_NE(wrongArch.error().message.find("slot 'prep' of engine 'test:slotted'"), std::string::npos);
  EXPECT_TRUE(other->launches.empty());

  EXPECT_EQ(DeviceSlotProgram::create(sm, ukdpack::SlotProgram{}, s.backend).error().code, "PLAN_EMPTY");
}
