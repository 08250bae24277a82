// A LinearizationSource whose residuals and Jacobian slices come from Python (lmtrain.torch's
// torch path, DESIGN.md §9): the LM step stays the library's — damping, acceptance, the linear
// solvers, mixed precision, penalties, geodesic acceleration, termination and the memory plan —
// and only asks Python for numbers, through an object with the methods
//   linearize(theta) -> (F, r)            F at θ and the residual vector r (m values), or
//                       (F, r, blocks)    … and the batch's residual blocks, a sequence of
//                                         (name, first_row, rows, scale) (ResidualBlock)
//   jacobian(theta, first, count) -> J    rows of units [first, first + count): count·R × n
//   objective(theta) -> F                 F at a trial point
//   residuals_at(theta) -> r              r at a point θ ± hv (geodesic acceleration)
//   jacobian_transpose_times(theta, u) -> Jᵀu   optional: one reverse pass through r's graph
// θ and u are views of the library's own buffers (torch tensors made through DLPack, no copy) that
// are valid during the call only.  r and J must be contiguous rows of the model's dtype on the
// model's device; they are read in place (J's row stride may exceed n) and kept alive until the
// next call that replaces them.
//
// The GIL is taken for each call and released around everything else.  A call that raises marks
// the source failed: from then on it returns NaN objectives and NaN residuals without calling
// Python, so the step ends on every rank (the NaN sums are the same everywhere) instead of
// leaving other ranks waiting in a collective; take_error() hands the exception back to the
// binding, which raises it once the step has returned.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "lmtrain/solve/linearization_source.h"

namespace lmtrain::python {

template <typename T>
class ForeignSource final : public LinearizationSource<T> {
 public:
  struct Shape {
    std::size_t params = 0;
    std::size_t residuals_per_unit = 1;  // R
    // What computing a slice took per unit at its peak, measured by the caller over a probe
    // slice (lmtrain.torch: torch.cuda.max_memory_allocated, or the process's peak resident
    // memory), and how; 0 when it was not measured (then `measured` says why).
    std::size_t measured_bytes_per_unit = 0;
    std::string measured;
    // The user capped the slice (SolverOptions::max_slice_samples): an unmeasured slice is then
    // counted at its rows of J, not at the safety margin below.
    bool slice_capped = false;
    ParameterGroups groups;
  };

  ForeignSource(nanobind::object callbacks, LinearAlgebra<T>& backend, Shape shape);

  std::size_t num_params() const override { return shape_.params; }
  std::size_t residuals_per_sample() const override { return shape_.residuals_per_unit; }
  LinearAlgebra<T>& model_backend() const override { return backend_; }
  // The plan's slice, handed to Python: the callbacks' use_memory_plan(bytes), where they have
  // one, learns the bytes the plan gives one slice (`slice` units at footprint()'s bytes per
  // unit), so that the residual_fn's own work — lmtrain.torch.pinn's chunks of J within a slice
  // and its residual evaluations between steps — takes what the plan counted, not a size the
  // front end picks.
  void reserve(std::size_t batch, std::size_t slice) override;
  // Python holds the batch's residuals r (and, for the geodesic correction, r at θ ± hv); a
  // slice costs its rows of J at least, the measured peak when there is one, and three times its
  // rows of J when nothing was measured and the slice is not capped (torch.func's intermediate
  // tensors, unmeasured, are of the slice's order).
  SourceFootprint footprint(std::size_t batch, bool trial_residuals) const override;
  // torch's slices are already laid out as it computes them: no padding of the rows.
  SlicePreference slice_preference() const override { return {}; }
  bool borrows_slices() const override { return true; }

  double linearize(const T* params, const T* x, const T* y, std::size_t batch) override;
  std::size_t batch() const override { return batch_; }
  void clear_batch() override { batch_ = 0; }
  const T* residuals() const override { return residuals_; }
  // What the last linearize returned (read by the step without the GIL: plain C++ data).
  std::vector<ResidualBlock> residual_blocks() const override;
  JacobianRows<T> jacobian_slice(const T* params, std::size_t first, std::size_t count, T* scratch,
                                 std::size_t scratch_ld) override;
  double objective(const T* params) override;
  void residuals_at(const T* params, T* r) override;
  bool computes_transpose_product() const override { return has_transpose_product_; }
  bool jacobian_transpose_times(const T* params, const T* u, T* out) override;
  ParameterGroups relevance_groups() const override { return shape_.groups; }
  // cross_entropy_sampled's draws: Python's linearization keeps the key (set_draw_key).
  void set_draw_key(std::uint64_t key) override;

  // The first exception a call raised since the last take_error(), if any (the GIL must be held).
  std::optional<nanobind::python_error> take_error();
  bool failed() const { return failed_; }
  // Records an exception raised by Python on the source's behalf (the fit run's data callbacks;
  // the GIL is held): from then on the source fails as if one of its own calls had raised.
  void fail(nanobind::python_error& error);
  // Drops the arrays Python lent (the GIL must be held): between steps nothing stays borrowed.
  void release_borrowed();
  // The Python objects it holds, for the cyclic garbage collector (tp_traverse), and dropping
  // them (tp_clear): a residual_fn that refers back to its optimizer makes a cycle through C++.
  nanobind::handle callbacks() const { return callbacks_; }
  void clear_callbacks() {
    release_borrowed();
    callbacks_ = nanobind::none();
  }

 private:
  // θ (or u) as a tensor of Python's framework viewing `data`, valid during one call.
  nanobind::object view(const T* data, std::size_t n) const;
  // A 1-D array of `n` T on the backend's device, or a message saying what it is instead.
  nanobind::ndarray<> checked_vector(nanobind::handle value, std::size_t n, const char* what) const;
  // linearize()'s blocks: each (name, first_row, rows, scale) inside the m residual rows.
  static std::vector<ResidualBlock> checked_blocks(nanobind::handle value, std::size_t m);
  double nan() const { return std::numeric_limits<double>::quiet_NaN(); }

  nanobind::object callbacks_;
  LinearAlgebra<T>& backend_;
  Shape shape_;
  bool has_transpose_product_ = false;
  bool has_memory_hook_ = false;  // callbacks_.use_memory_plan
  std::size_t batch_ = 0;
  const T* residuals_ = nullptr;
  std::vector<ResidualBlock> blocks_;  // of the current batch (empty: none declared)
  nanobind::ndarray<> residuals_array_, slice_array_;  // what Python lent, kept alive
  DeviceBuffer<T> nan_residuals_, zero_slice_;         // what a failed source hands out
  bool failed_ = false;
  std::optional<nanobind::python_error> error_;
};

}  // namespace lmtrain::python
