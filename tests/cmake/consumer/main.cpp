// Loads a shard with the installed runtime, as a consuming library would, and
// prints what its state manager keeps. Exit 0 when every kernel is kept.
#include <cstdio>

#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/state_manager.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: load_shard SHARD\n");
    return 2;
  }
  ukdpack::DescriptorSet set = ukdpack::loadShard(argv[1]);
  const ukdpack::Registry registry = ukdpack::stubRegistry(set, "gfx90a");
  const ukdpack::StateManager manager(std::move(set), registry, "gfx90a");
  std::printf("kept %zu kernels, dropped %zu\n", manager.kept().size(), manager.dropped().size());
  return manager.kept().empty() || !manager.dropped().empty() ? 1 : 0;
}
