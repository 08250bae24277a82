// Measurement helpers shared by the benchmark drivers (lmtrain_workloads and the FANN peer
// fann_train), so both report peak memory and medians the same way.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace bench {

// Peak resident set size of this process so far (Linux reports ru_maxrss in KiB).
inline long long peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<long long>(usage.ru_maxrss) * 1024;
}

// Median (the mean of the middle two for an even count); NaN for no values.
inline double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

}  // namespace bench
