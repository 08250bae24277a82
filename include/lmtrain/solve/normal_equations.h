// The linear system of one LM step, built slice by slice:
//   primal  A = Σₛ JₛᵀJₛ (SYRK, upper triangle), g = Σₛ Jₛᵀrₛ
//   stored  J and r kept whole (for the dual form δ = Jᵀ(JJᵀ + λI)⁻¹r, or matrix-free CG), and
//           g = Jᵀr
// With several ranks, each builds the equations of its shard and the LM step sums them.
// A retry of the step never rebuilds any of it.
#pragma once

#include "lmtrain/core/timer.h"
#include "lmtrain/nn/jacobian.h"

namespace lmtrain {

template <typename T>
struct NormalEquations {
  std::size_t n = 0;      // parameters
  std::size_t m = 0;      // residual rows of the current batch
  bool jacobian_stored = false;  // J and r stored instead of A (dual form, CG)
  double objective = 0;   // F at the linearization point
  DeviceBuffer<T> a;      // n × n, upper triangle (primal)
  DeviceBuffer<T> g;      // n: Jᵀr
  DeviceBuffer<T> j;      // m × n (jacobian_stored)
  DeviceBuffer<T> r;      // m (jacobian_stored)
};

template <typename T>
class NormalEquationsBuilder {
 public:
  // `slice_samples` comes from the memory plan; `max_batch` sizes the dual form's J.
  // `store_jacobian`: keep J and r (dual form, CG) instead of forming A.
  NormalEquationsBuilder(JacobianEngine<T>& engine, std::size_t slice_samples,
                         std::size_t max_batch, bool store_jacobian);

  // Linearizes at `params` on a batch and fills `ne`; returns F.
  double build(const T* params, const T* x, const T* y, std::size_t batch, NormalEquations<T>& ne,
               PhaseTimes& times);

  std::size_t slice_samples() const { return slice_samples_; }
  JacobianEngine<T>& engine() { return engine_; }

 private:
  JacobianEngine<T>& engine_;
  Backend<T>& backend_;
  std::size_t slice_samples_;
  std::size_t max_batch_;
  bool store_jacobian_;
  DeviceBuffer<T> slice_;
};

}  // namespace lmtrain
