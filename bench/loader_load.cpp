// ukdpack_loader_bench: the C++ side of `runtime_load_10k_ms` (bench/README.md,
// "Loader"). Loads one shard and builds its state manager (stub handlers, as
// bench/run.py does through the extension) N times, frees each set apart, and
// prints one JSON line with the median load and free times in ms.
//
//   ukdpack_loader_bench SHARD [--arch gfx90a] [--runs 5] [--threads 0] [--index on|off]
//
// --index off loads the JSON as written even where the shard has an index
// (index.ukdx): the path of a shard packed before the index, for side-by-side runs.
// Under `perf stat -e instructions` or callgrind, --runs 1 gives the cost of
// one load plus one free (and the process start).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/state_manager.hpp"

using ukdbench::cpuMs;
using ukdbench::median;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ukdpack_loader_bench SHARD [--arch A] [--runs N] [--threads N] [--index on|off]\n");
    return 2;
  }
  const std::string shard = argv[1];
  std::string arch = "gfx90a";
  int runs = 5;
  ukdpack::LoaderOptions options;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--arch") {
      arch = argv[i + 1];
    } else if (flag == "--runs") {
      runs = std::atoi(argv[i + 1]);
    } else if (flag == "--index") {
      options.useIndex = std::string(argv[i + 1]) != "off";
    } else if (flag == "--threads") {
      options.threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "ukdpack_loader_bench: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  using Clock = std::chrono::steady_clock;
  std::vector<double> load, setOnly, freed, loadCpu, freedCpu;
  std::size_t kept = 0, diagnostics = 0;
  bool fromIndex = false, listed = false;
  for (int r = 0; r < runs; ++r) {
    auto start = Clock::now();
    double cpu = cpuMs();
    auto set = std::make_shared<const ukdpack::DescriptorSet>(ukdpack::loadShard(shard, options));
    setOnly.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    auto sm = std::make_unique<ukdpack::StateManager>(set, ukdpack::stubRegistry(*set, arch), arch);
    load.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    loadCpu.push_back(cpuMs() - cpu);
    kept = sm->kept().size();
    diagnostics = set->diagnostics.size();
    fromIndex = set->fromIndex;
    listed = set->listedByIndex;
    start = Clock::now();
    cpu = cpuMs();
    sm.reset();
    set.reset();
    freed.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    freedCpu.push_back(cpuMs() - cpu);
  }
  std::printf(
      "{\"kept\": %zu, \"diagnostics\": %zu, \"from_index\": %s, \"listed_by_index\": %s, \"load_ms\": %.2f, "
      "\"free_ms\": %.2f, "
      "\"load_cpu_ms\": %.2f, \"free_cpu_ms\": %.2f, \"set_ms\": %.2f, \"runs\": %d}\n",
      kept, diagnostics, fromIndex ? "true" : "false", listed ? "true" : "false", median(load), median(freed),
      median(loadCpu), median(freedCpu), median(setOnly), runs);
  return 0;
}
