// The fixture of the CUDA tests: a CUDA backend of precision T and the fp64 CPU backend as the
// reference, random inputs away from zero, and transfers that widen results to double.  Every
// test skips when no CUDA device is visible.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/cuda_backend.h"

namespace lmtrain::testing {

template <typename T>
constexpr double kCudaTolerance = std::is_same_v<T, float> ? 1e-4 : 1e-10;

template <typename T>
class CudaVsCpuTest : public ::testing::Test {
 public:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    gpu_ = make_cuda_backend<T>(0);
    cpu_ = make_cpu_backend<double>();
  }

  // Magnitudes in [lo, hi] with random signs.
  std::vector<T> random(std::size_t n, double lo = 0.1, double hi = 1.0) {
    std::uniform_real_distribution<double> magnitude(lo, hi);
    std::bernoulli_distribution negative(0.5);
    std::vector<T> v(n);
    for (T& x : v) {
      const double m = magnitude(rng_);
      x = static_cast<T>(negative(rng_) ? -m : m);
    }
    return v;
  }
  std::vector<T> uniform(std::size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<T> v(n);
    for (T& x : v) x = static_cast<T>(dist(rng_));
    return v;
  }

  DeviceBuffer<T> upload(const std::vector<T>& host) {
    DeviceBuffer<T> d = gpu_->allocate(host.size());
    gpu_->copy_from_host(host.data(), d.data(), host.size());
    return d;
  }
  std::vector<double> download(const T* device, std::size_t n) {
    std::vector<T> host(n);
    gpu_->copy_to_host(device, host.data(), n);
    return widen(host);
  }
  std::vector<double> download(const DeviceBuffer<T>& d) { return download(d.data(), d.size()); }
  static std::vector<double> widen(const std::vector<T>& v) {
    return std::vector<double>(v.begin(), v.end());
  }

  std::mt19937_64 rng_{20240611};
  std::unique_ptr<Backend<T>> gpu_;
  std::unique_ptr<Backend<double>> cpu_;
};

struct PrecisionName {
  template <typename T>
  static std::string GetName(int /*index*/) {
    return std::is_same_v<T, float> ? "float" : "double";
  }
};

using Precisions = ::testing::Types<float, double>;

}  // namespace lmtrain::testing
