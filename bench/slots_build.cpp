// ukdpack_slots_bench: the state manager's build time for a shard with slots
// against the same shard without (bench/README.md, "Slots: the state
// manager's build"). Writes two shards of the same kernels into a temporary
// folder: ENGINES engines of 3 packs each; in one the engines are UED 1.1 with
// slots (prep, main, finish) and each pack fills one slot, in the other they
// are plain UED 1.0. Loads each once, then builds a state manager of each
// RUNS times, interleaved (the order swapped every run), and prints one JSON
// document: the medians of wall and CPU ms, their ratio, and the load average.
//
//   ukdpack_slots_bench [--kernels 10000] [--engines 100] [--runs 15] [--arch gfx90a]
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace {

namespace fs = std::filesystem;
using ukdpack::Json;

using ukdbench::cpuMs;
using ukdbench::median;

void write(const fs::path& p, const Json& doc) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << doc.dump(1);
}

const char* const kSlots[] = {"prep", "main", "finish"};

// The shard: generics, then per engine one UED and three packs of its kernels.
void writeShard(const fs::path& root, std::size_t kernels, std::size_t engines, bool slotted) {
  write(root / "md.kmd.json", {{"id", "kmd-1"},
                               {"version", "1.0"},
                               {"name", "md"},
                               {"fields", Json::array({{{"name", "tile"}, {"type", "int"}}})}});
  write(root / "m.umd.json",
        {{"id", "umd-1"}, {"version", "1.0"}, {"name", "m"}, {"scope", "graph"}, {"match_symbol", "bench_match"}});
  write(root / "d.udd.json", {{"id", "udd-1"}, {"version", "1.0"}, {"name", "d"}, {"dispatch_symbol", "bench_one"}});
  std::size_t next = 0;
  for (std::size_t e = 0; e < engines; ++e) {
    const std::string engine = "ued-" + std::to_string(e);
    Json ued = {{"id", engine},
                {"version", slotted ? "1.1" : "1.0"},
                {"name", "bench:e" + std::to_string(e)},
                {"metadata", "kmd-1"}};
    if (slotted) ued["slots"] = Json::array({{{"name", "prep"}}, {{"name", "main"}}, {{"name", "finish"}}});
    write(root / engine / "e.ued.json", ued);
    const std::size_t share = kernels / engines + (e < kernels % engines ? 1 : 0);
    for (std::size_t s = 0; s < 3; ++s) {
      Json members = Json::array();
      const std::size_t count = share / 3 + (s < share % 3 ? 1 : 0);
      for (std::size_t k = 0; k < count; ++k, ++next) {
        members.push_back({{"id", "ukd-" + std::to_string(next)},
                           {"version", "1.0"},
                           {"name", "k" + std::to_string(next)},
                           {"priority", static_cast<int>(next % 7)},
                           {"metadata", {{"tile", next}}},
                           {"kernel_source",
                            {{"kind", "hip"},
                             {"source", "k.hip"},
                             {"entry", "k" + std::to_string(next)},
                             {"build", Json::object()}}}});
      }
      Json kdp = {{"id", engine + "-" + kSlots[s]},
                  {"version", slotted ? "1.1" : "1.0"},
                  {"name", engine + "-" + kSlots[s]},
                  {"arch", Json::array({"gfx90a"})},
                  {"matchers", Json::array({"umd-1"})},
                  {"engine", engine},
                  {"dispatch", "udd-1"},
                  {"kernelDescriptors", members}};
      if (slotted) kdp["slot"] = kSlots[s];
      write(root / engine / (std::string(kSlots[s]) + ".kdp.json"), kdp);
    }
  }
}

struct Case {
  std::shared_ptr<const ukdpack::DescriptorSet> set;
  ukdpack::Registry registry;
  std::vector<double> wall, cpu;
  std::size_t kept = 0, slotted = 0;
};

void buildOnce(Case& c, const std::string& arch) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu = cpuMs();
  const ukdpack::StateManager sm(c.set, c.registry, arch);
  c.cpu.push_back(cpuMs() - cpu);
  c.wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  c.kept = sm.kept().size();
  c.slotted = sm.slottedEngines().size();
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t kernels = 10000, engines = 100;
  int runs = 15;
  std::string arch = "gfx90a";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--kernels") {
      kernels = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (flag == "--engines") {
      engines = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (flag == "--runs") {
      runs = std::atoi(argv[i + 1]);
    } else if (flag == "--arch") {
      arch = argv[i + 1];
    } else {
      std::fprintf(stderr, "ukdpack_slots_bench: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  std::string pattern = (fs::temp_directory_path() / "ukdpack-slots-bench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "ukdpack_slots_bench: cannot make a temporary folder\n");
    return 1;
  }
  const fs::path tmp = pattern;
  Case plain, slotted;
  for (Case* c : {&plain, &slotted}) {
    const fs::path root = tmp / (c == &plain ? "plain" : "slotted");
    writeShard(root, kernels, engines, c == &slotted);
    c->set = std::make_shared<const ukdpack::DescriptorSet>(ukdpack::loadShard(root));
    c->registry = ukdpack::stubRegistry(*c->set, arch);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  for (int r = 0; r < runs; ++r) {
    Case& first = r % 2 == 0 ? plain : slotted;
    Case& second = r % 2 == 0 ? slotted : plain;
    buildOnce(first, arch);
    buildOnce(second, arch);
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  const double plainCpu = median(plain.cpu), slottedCpu = median(slotted.cpu);
  const double plainWall = median(plain.wall), slottedWall = median(slotted.wall);
  Json out = {{"kernels", kernels},
              {"engines", engines},
              {"runs", runs},
              {"arch", arch},
              {"unslotted", {{"kept", plain.kept}, {"build_ms", plainWall}, {"build_cpu_ms", plainCpu}}},
              {"slotted",
               {{"kept", slotted.kept},
                {"slotted_engines", slotted.slotted},
                {"build_ms", slottedWall},
                {"build_cpu_ms", slottedCpu}}},
              {"ratio_cpu", plainCpu > 0 ? slottedCpu / plainCpu : 0.0},
              {"ratio_wall", plainWall > 0 ? slottedWall / plainWall : 0.0},
              {"goal_ratio", 1.10},
              {"load_average", {load[0], load[1], load[2]}},
              {"set_diagnostics",
               {{"unslotted", plain.set->diagnostics.size()}, {"slotted", slotted.set->diagnostics.size()}}}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
