// A LinearizationSource that declares residual blocks over another source's batch (as a PINN's
// conditions are), for the tests of the step's block losses; and, for the tests of the builder's
// slicing, one that prefers another device's slicing (prefer()).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "lmtrain/solve/linearization_source.h"

namespace lmtrain::testing {

// Every call goes to `inner`; residual_blocks() returns the blocks given (constructor, set_blocks).
template <typename T>
class BlockSource final : public LinearizationSource<T> {
 public:
  BlockSource(LinearizationSource<T>& inner, std::vector<ResidualBlock> blocks)
      : inner_(inner), blocks_(std::move(blocks)) {}
  std::size_t num_params() const override { return inner_.num_params(); }
  std::size_t residuals_per_sample() const override { return inner_.residuals_per_sample(); }
  LinearAlgebra<T>& model_backend() const override { return inner_.model_backend(); }
  void reserve(std::size_t batch, std::size_t slice) override { inner_.reserve(batch, slice); }
  void release_slices() override { inner_.release_slices(); }
  SlicePreference slice_preference() const override {
    return preference_ ? *preference_ : inner_.slice_preference();
  }
  // The slicing another device prefers (the CUDA backend's stride-only padding, on the CPU).
  void prefer(const SlicePreference& preference) { preference_ = preference; }
  SourceFootprint footprint(std::size_t batch, bool trial) const override {
    return inner_.footprint(batch, trial);
  }
  double linearize(const T* params, const T* x, const T* y, std::size_t batch) override {
    return inner_.linearize(params, x, y, batch);
  }
  std::optional<double> linearize_into(const T* params, const T* x, const T* y, std::size_t batch,
                                       double* objective) override {
    return inner_.linearize_into(params, x, y, batch, objective);
  }
  std::size_t batch() const override { return inner_.batch(); }
  void clear_batch() override { inner_.clear_batch(); }
  const T* residuals() const override { return inner_.residuals(); }
  std::vector<ResidualBlock> residual_blocks() const override { return blocks_; }
  void set_blocks(std::vector<ResidualBlock> blocks) { blocks_ = std::move(blocks); }
  JacobianRows<T> jacobian_slice(const T* params, std::size_t first, std::size_t count, T* scratch,
                                 std::size_t scratch_ld) override {
    return inner_.jacobian_slice(params, first, count, scratch, scratch_ld);
  }
  double objective(const T* params) override { return inner_.objective(params); }
  std::optional<double> objective_into(const T* params, double* result) override {
    return inner_.objective_into(params, result);
  }
  void residuals_at(const T* params, T* r) override { inner_.residuals_at(params, r); }
  ParameterGroups relevance_groups() const override { return inner_.relevance_groups(); }

 private:
  LinearizationSource<T>& inner_;
  std::vector<ResidualBlock> blocks_;
  std::optional<SlicePreference> preference_;
};

}  // namespace lmtrain::testing
