// What the LM step linearizes (DESIGN.md §9, in the spirit of Ceres' CostFunction): the residuals
// r(θ) of a batch and their Jacobian J, delivered slice by slice, plus the objective at trial
// points.  The step, its normal-equation builder, its geodesic correction and its penalties see
// only this interface, so every decision of the step (damping, acceptance, termination, memory)
// is the same whoever computes J:
//   EngineSource     lmtrain's own network (nn/: structural Jacobians), train/engine_source.h —
//                    train/ adapts nn/ to this interface, so solve/ needs nothing of nn/;
//   ForeignSource    slices computed outside the library — lmtrain.torch's torch.func Jacobians,
//                    handed over through DLPack (src/python/foreign_source.h).
// Units: a batch is `batch` units (samples) of residuals_per_sample() rows each; row u·R + k of J
// is ∂r_{u,k}/∂θ, columns in the flat parameter order.  Pointers are device pointers of
// model_backend() unless their name says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/core/parameter_groups.h"

namespace lmtrain {

// A block of Jacobian rows: rows × n values with row stride `ld` (≥ n), valid until the source's
// next call.  Either the scratch the caller offered or the source's own storage (a borrowed
// torch tensor), so a foreign slice is folded into A without a copy.
template <typename T>
struct JacobianRows {
  const T* data = nullptr;
  std::size_t ld = 0;
};

// Bytes a source allocates, for the memory plan (solve/step_planner.h).
struct SourceFootprint {
  std::size_t fixed_bytes = 0;             // independent of the slice (activations, residuals)
  std::size_t bytes_per_slice_sample = 0;  // per unit of a slice (seed rows, Jacobian blocks)
  std::string measured;                    // how the figures were obtained, for the Summary
};

// A named block of the current batch's residual rows: a condition of a physics-informed problem
// (the PDE in the interior, an initial or a boundary condition), whose loss the step reports on
// its own.  Its loss is scale · Σ r_i² over rows [first_row, first_row + rows) of r: scale = ½
// gives the block's part of the objective F = ½‖r‖²; a PINN whose rows are w·F(point)/√N
// declares scale = 1/w² and reports the condition's mean |F|² over its N points.
struct ResidualBlock {
  std::string name;
  std::size_t first_row = 0;
  std::size_t rows = 0;
  double scale = 1.0;
};

// A block's loss as the step reports it (ResidualBlock's convention).
struct BlockLoss {
  std::string name;
  double loss = 0;
  bool operator==(const BlockLoss&) const = default;
};

template <typename T>
class LinearizationSource {
 public:
  virtual ~LinearizationSource() = default;

  virtual std::size_t num_params() const = 0;
  // Residual rows per unit of a batch (R).
  virtual std::size_t residuals_per_sample() const = 0;
  // The backend of the model's precision on the device where J and r live.
  virtual LinearAlgebra<T>& model_backend() const = 0;
  // Buffers for batches of up to `batch` units and slices of up to `slice` units.
  virtual void reserve(std::size_t batch, std::size_t slice) = 0;
  // Frees what reserve sized by the slice (after an out-of-memory error the planner halves it).
  virtual void release_slices() {}
  // What reserve(batch, slice) allocates, and what a step's evaluations add: for the plan.
  // `trial_residuals`: residuals_at is used (the geodesic correction).
  virtual SourceFootprint footprint(std::size_t batch, bool trial_residuals) const = 0;
  // The slicing the device runs fastest (Backend::slice_preference), for the plan and the builder.
  virtual SlicePreference slice_preference() const {
    return model_backend().slice_preference(num_params());
  }

  // The residuals at `params` on a batch of `batch` units (x, y: device pointers of the native
  // data, null for a source that holds its own batch).  Returns the objective F there (each
  // loss's convention, docs/design.md "Objective convention").
  virtual double linearize(const T* params, const T* x, const T* y, std::size_t batch) = 0;
  // linearize() for the LM step, which reads F with its other scalars in one transfer (a GPU
  // waits at every read): a source that computes F on the device leaves it at `objective` (one
  // double of model_backend()'s device) and returns nullopt; one that has F on the host returns
  // it and leaves `objective` alone, which is what this default does.
  virtual std::optional<double> linearize_into(const T* params, const T* x, const T* y,
                                               std::size_t batch, double* /*objective*/) {
    return linearize(params, x, y, batch);
  }
  // Units of the current batch (0: this rank's shard is empty).
  virtual std::size_t batch() const = 0;
  // Marks the current batch empty (a rank whose shard of a batch has no units).
  virtual void clear_batch() = 0;
  // r of the current batch (batch·R values), valid after linearize.
  virtual const T* residuals() const = 0;
  // Rows of units [first, first + count) of J at the linearization point: written into `scratch`
  // (row stride scratch_ld ≥ n; columns ≥ n of it are left alone) or the source's own storage.
  virtual JacobianRows<T> jacobian_slice(const T* params, std::size_t first, std::size_t count,
                                         T* scratch, std::size_t scratch_ld) = 0;
  // The named blocks of the current batch's residual rows, valid after linearize (empty: none,
  // and the step then spends nothing on them).  With several ranks every rank's source declares
  // the same blocks in the same order (its own rows of each; rows = 0 where its shard has
  // none): the step sums their losses over the ranks in one all-reduce.
  virtual std::vector<ResidualBlock> residual_blocks() const { return {}; }
  // F at other parameters on the current batch (a trial point).
  virtual double objective(const T* params) = 0;
  // objective() left at `result` on the device (nullopt) or returned, as linearize_into.
  virtual std::optional<double> objective_into(const T* params, double* /*result*/) {
    return objective(params);
  }
  // Residuals of the current batch at other parameters into r (batch·R values), without reading
  // anything back (the geodesic correction needs no F there).  The linearization (residuals,
  // what jacobian_slice reads) stays as it was.
  virtual void residuals_at(const T* params, T* r) = 0;
  // For a recording of objective_into's and residuals_at's device work (DeviceQueue::record,
  // SolverOptions::cuda_graphs): what that work depends on besides the parameters and the output
  // it is given — the batch, the source's own buffers, anything it reads on the host —, so that
  // work recorded under one key replays right while the key is the same.  A source that returns
  // one queues that work on model_backend()'s queue alone, with no read, wait or allocation once
  // it has run under the same key, and leaves F on the device in objective_into (nullopt).
  // nullopt (the default): not recordable (a torch source queues on torch's stream).
  virtual std::optional<std::vector<std::uintptr_t>> evaluation_key() const { return std::nullopt; }
  // Whether jacobian_slice returns the source's own storage rather than writing into the
  // scratch it is offered: the builder then keeps no scratch (and the plan counts none).
  virtual bool borrows_slices() const { return false; }
  // Whether jacobian_transpose_times has a cheaper way to Jᵀu than building J again (a reverse
  // pass through the source's own graph).
  virtual bool computes_transpose_product() const { return false; }
  // out = Jᵀu (n values) at the linearization point; false when the source cannot (then the
  // builder builds the slices again).  Called only when computes_transpose_product().
  virtual bool jacobian_transpose_times(const T* /*params*/, const T* /*u*/, T* /*out*/) {
    return false;
  }
  // cross_entropy_sampled: the next linearization draws its rows under key + 1 (each one counts
  // up from there); the fit run sets it from the rank and the step count, so that ranks draw
  // independently and a resumed or retried step draws what the uninterrupted run would.
  virtual void set_draw_key(std::uint64_t /*key*/) {}
  // The relevance groups of ard (SolverOptions::regularization): one per input feature, then one
  // per later weight block and per bias.
  virtual ParameterGroups relevance_groups() const = 0;
};

}  // namespace lmtrain
