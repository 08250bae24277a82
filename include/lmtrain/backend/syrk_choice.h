// How a backend forms A = α JᵀJ + β A, chosen per shape by measurement: the device's own SYRK or
// split-K (split_k_syrk.h) with one of its candidate plans.  The first call of each shape
// (n, rows, row stride) runs every way once to warm it up and then times each kRepeats times,
// interleaved, into scratch output; the median decides, and every later call of that shape runs
// the winner.  So nothing rests on a constant that holds on one GPU and not the next: cuBLAS's
// SYRK ran W2's shape at 11 % of the GEMM rate on an H200 and n = 11 101 at 50 TFLOP/s
// (shared/gpu-runs/2026-11-26-h200/README.md).
//
// The CUDA backend makes its syrk_ata one of these.  The CPU backend does not (OpenBLAS's SYRK
// splits its work over the threads itself and runs at its GEMM rate), but the tests run this
// class on the CPU backend, which is how the choice is checked without a GPU.
//
// The measurement costs the host one wait for the device per shape, and split-K a workspace the
// backend keeps (at most J's rows' own size, split_k_syrk.h) plus, while timing, one n × n
// scratch; where they would take more than a quarter of the device's free memory, or cannot be
// allocated, the shape keeps SYRK and the report says so.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/backend/split_k_syrk.h"

namespace lmtrain {

template <typename T>
class SyrkChoice {
 public:
  // The backend's own SYRK: upper triangle (row-major) of C (n × n) = α JᵀJ + β C.
  using Syrk = std::function<void(std::size_t n, std::size_t k, T alpha, const T* j,
                                  std::size_t ldj, T beta, T* c)>;
  static constexpr int kRepeats = 3;

  // `la` runs split-K and the timing (its phase clock); `multiprocessors` and `stride_multiple`
  // size the candidate plans (split_k_candidates); `syrk` is the device's SYRK.
  SyrkChoice(LinearAlgebra<T>& la, std::size_t multiprocessors, std::size_t stride_multiple,
             Syrk syrk);

  // The upper triangle of C (n × n) = α JᵀJ + β C for J (k × n, row stride ldj), the shape's
  // fastest way (measured on its first call).
  void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta, T* c);
  // Drops every decision (the device's arithmetic changed, e.g. TF32 switched): the next call of
  // each shape measures again.
  void forget() { decisions_.clear(); }
  // auto (the default): measure each shape; syrk or split_k: that way without measuring
  // (normal_matrix_method.h).  A change forgets the decisions made.
  void set_method(NormalMatrixMethod method);
  // One line per shape decided, in the order decided: which way and why, with the times.
  std::string report() const;

 private:
  using Shape = std::tuple<std::size_t, std::size_t, std::size_t>;  // n, k, ldj
  struct Decision {
    std::optional<SplitKPlan> plan;  // none: SYRK
    std::string why;
    std::size_t order = 0;  // when decided, for the report
  };
  // The way of a new shape: as asked (method_), or measured (auto).
  Decision decide(std::size_t n, std::size_t k, const T* j, std::size_t ldj);
  Decision split_k_as_asked(std::size_t n, std::size_t k);
  Decision measure(std::size_t n, std::size_t k, const T* j, std::size_t ldj);
  // Median seconds of each way (index 0: SYRK, then the plans' order) into scratch output.
  std::vector<double> time_ways(const std::vector<SplitKPlan>& plans, std::size_t n, std::size_t k,
                                const T* j, std::size_t ldj, T* scratch);

  LinearAlgebra<T>& la_;
  std::size_t multiprocessors_;
  std::size_t stride_multiple_;
  Syrk syrk_;
  std::map<Shape, Decision> decisions_;
  NormalMatrixMethod method_ = NormalMatrixMethod::kAuto;
  DeviceBuffer<T> workspace_;  // the partials of the largest plan in use (grow-only)
};

}  // namespace lmtrain
