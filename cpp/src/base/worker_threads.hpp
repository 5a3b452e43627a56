// One way to spread work over threads, for the loader, the prebuilt batch reader and
// the launch-code check.
#pragma once

#include <algorithm>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace ukdpack::detail {

// Runs `work` (a callable that takes items until none is left) on this thread and on
// up to `threads` - 1 more, never more threads than `items`; 0 means one per core. A
// thread that cannot be started leaves its share to those that were.
template <typename Work>
void runOnThreads(std::size_t threads, std::size_t items, const Work& work) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t extra = items == 0 ? 0 : std::min(threads, items) - 1;
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (std::size_t t = 0; t < extra; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones started (and this one) do the work
    }
  }
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace ukdpack::detail
