// What the C++ benches share: process CPU time and the median of their runs.
#pragma once

#include <time.h>

#include <algorithm>
#include <vector>

namespace ukdbench {

// CPU time of the whole process (every thread), in ms: a loaded machine
// stretches wall time, not this.
inline double cpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace ukdbench
