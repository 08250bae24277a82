// lmtrain's own network as the LM step's linearization source: the JacobianEngine's structural
// Jacobians (nn/jacobian.h) behind solve/'s interface.  It lives in train/, above both, so that
// neither nn/ nor solve/ needs the other.
#pragma once

#include <optional>

#include "lmtrain/nn/jacobian.h"
#include "lmtrain/solve/linearization_source.h"

namespace lmtrain {

template <typename T>
class EngineSource final : public LinearizationSource<T> {
 public:
  explicit EngineSource(JacobianEngine<T>& engine) : engine_(engine) {}

  JacobianEngine<T>& engine() const { return engine_; }

  std::size_t num_params() const override { return engine_.num_params(); }
  std::size_t residuals_per_sample() const override { return engine_.residuals_per_sample(); }
  LinearAlgebra<T>& model_backend() const override { return engine_.model_backend(); }
  void reserve(std::size_t batch, std::size_t slice) override { engine_.reserve(batch, slice); }
  void release_slices() override { engine_.release_slices(); }
  SourceFootprint footprint(std::size_t batch, bool trial_residuals) const override {
    const Sequential<T>& model = engine_.model();
    const std::size_t R = engine_.residuals_per_sample();
    SourceFootprint f;
    f.fixed_bytes = (JacobianEngine<T>::fixed_elements(model, batch, R, trial_residuals) +
                     model.workspace_elements()) *
                    sizeof(T);
    f.bytes_per_slice_sample = JacobianEngine<T>::slice_sample_elements(model, R) * sizeof(T);
    f.measured = "counted from the layers' buffers";
    return f;
  }

  double linearize(const T* params, const T* x, const T* y, std::size_t batch) override {
    return engine_.linearize(params, x, y, batch);
  }
  std::optional<double> linearize_into(const T* params, const T* x, const T* y, std::size_t batch,
                                       double* objective) override {
    engine_.linearize_into(params, x, y, batch, objective);
    return std::nullopt;
  }
  std::size_t batch() const override { return engine_.batch(); }
  void clear_batch() override { engine_.clear_batch(); }
  const T* residuals() const override { return engine_.residuals(); }
  JacobianRows<T> jacobian_slice(const T* params, std::size_t first, std::size_t count, T* scratch,
                                 std::size_t scratch_ld) override {
    engine_.jacobian_rows(params, first, count, scratch, scratch_ld);
    return {scratch, scratch_ld};
  }
  double objective(const T* params) override { return engine_.objective(params); }
  std::optional<double> objective_into(const T* params, double* result) override {
    engine_.objective_into(params, result);
    return std::nullopt;
  }
  void residuals_at(const T* params, T* r) override { engine_.residuals_at(params, r); }
  std::optional<std::vector<std::uintptr_t>> evaluation_key() const override {
    return engine_.evaluation_key();
  }
  void set_draw_key(std::uint64_t key) override { engine_.set_draw_key(key); }
  ParameterGroups relevance_groups() const override {
    return engine_.model().spec().relevance_groups();
  }

 private:
  JacobianEngine<T>& engine_;
};

}  // namespace lmtrain
