// Bounds on what rounding does to two runs that should agree, and the hooks with which
// scripts/measure-spread.sh measures it (issue 35); tests/python/spread.py is the same for Python.
//
// Two LM runs that compute the same thing in another order (several ranks and one, two linear
// solvers) agree only to rounding, which each step amplifies by up to cond(A + λD), by how much
// depending on the CPU's kernels (OpenBLAS's, lmtrain's SIMD paths).  A comparison of two such
// runs asserts expect_within(check, gap, bound) with a bound at least 1 000 times the largest gap
// measure-spread.sh saw over the kernel paths this machine runs and with the data of one side
// moved by one ulp (one_ulp), and says so in a comment.  Under the script:
//   LMTRAIN_SPREAD_LOG=FILE  expect_within also appends {"check", "gap", "bound"} to FILE;
//   LMTRAIN_SPREAD_ULP=1     one_ulp multiplies every value by 1 + ε of its type.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "lmtrain/lmtrain.h"

namespace lmtrain::testing {

inline bool spread_ulp_requested() {
  const char* on = std::getenv("LMTRAIN_SPREAD_ULP");
  return on != nullptr && std::strcmp(on, "1") == 0;
}

// v·(1 + ε) under LMTRAIN_SPREAD_ULP=1 (every nonzero value moves by about one ulp), else v.
template <typename T>
std::vector<T> one_ulp(std::vector<T> v) {
  if (!spread_ulp_requested()) return v;
  for (T& x : v) x *= 1 + std::numeric_limits<T>::epsilon();
  return v;
}

// Data held in double for a problem in T: moved by one ulp of T.
template <typename T>
std::vector<double> one_ulp_of(const std::vector<double>& v) {
  std::vector<T> in_t(v.begin(), v.end());
  in_t = one_ulp(std::move(in_t));
  return std::vector<double>(in_t.begin(), in_t.end());
}

// A data set with its inputs and targets moved by one_ulp.
template <typename T>
Dataset<T> one_ulp(Dataset<T> d) {
  d.x = one_ulp(std::move(d.x));
  d.y = one_ulp(std::move(d.y));
  return d;
}

// |a − b| / |b|.
inline double relative_error(double a, double b) {
  return std::fabs(a - b) / std::fabs(b);
}

// max |a_i − b_i| / max |b_i|: two parameter vectors' gap, relative to the larger's scale.
template <typename T>
double max_relative_difference(const std::vector<T>& a, const std::vector<T>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// EXPECT_LE(gap, bound); under LMTRAIN_SPREAD_LOG also records the gap, named by the test and
// `check`.
inline void expect_within(const std::string& check, double gap, double bound,
                          bool relative = true) {
  if (const char* log = std::getenv("LMTRAIN_SPREAD_LOG")) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string test =
        info == nullptr ? "?" : std::string(info->test_suite_name()) + "." + info->name();
    if (FILE* f = std::fopen(log, "a")) {
      std::fprintf(f,
                   "{\"check\": \"%s %s\", \"gap\": %.17g, \"bound\": %.17g, \"relative\": %s}\n",
                   test.c_str(), check.c_str(), gap, bound, relative ? "true" : "false");
      std::fclose(f);
    }
  }
  EXPECT_LE(gap, bound) << check << " (scripts/measure-spread.sh measures it)";
}

}  // namespace lmtrain::testing
