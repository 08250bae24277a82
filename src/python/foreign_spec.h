// What lmtrain.torch tells the library about a torch-path problem (ForeignStepSpec: sizes,
// options, device, the measured footprint, ard's groups), and what both torch-path bindings make
// of it: the backend and the ForeignSource's shape (foreign_step.cpp, foreign_fit.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "foreign_source.h"
#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/backend/device_queue.h"
#include "lmtrain/core/error.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain::python {

// Everything of a torch-path step but the callbacks: the problem's sizes, the options, the device
// and what the caller measured.
struct ForeignStepSpec {
  std::size_t parameters = 0;
  std::size_t residuals_per_unit = 1;
  std::size_t max_units = 0;    // the most units this rank linearizes in a step
  std::size_t total_units = 0;  // units of a step over all ranks (0: max_units)
  SolverOptions options;
  std::string loss = "mse";    // for geodesic_acceleration = auto; a residual_fn is mse
  std::size_t outputs = 1;     // per unit, for the reported loss (a residual_fn: 1 per row)
  std::string device = "cpu";  // cpu or cuda:N
  std::uintptr_t stream = 0;   // cuda: the caller's stream to run on (torch's current); 0: own
  // What computing a probe slice of J took per unit at its peak (0: not measured), and how it
  // was measured or why not (ForeignSource::footprint counts the rest).
  std::size_t bytes_per_unit = 0;
  std::string footprint_measured;
  // ard's groups (lmtrain.torch builds them from the module's parameters)
  std::vector<std::uint32_t> group_of;
  std::vector<std::string> group_names;
  std::vector<std::size_t> group_sizes;
  std::size_t input_groups = 0;
};

// The backend of `device` ("cpu", "cuda:N"), on the caller's `stream` when it gives one.
template <typename T>
inline std::unique_ptr<Backend<T>> backend_on(const std::string& device, std::uintptr_t stream) {
  const DeviceChoice choice = choose_device(device, 0);
  // On the caller's stream: ordered after the kernels that computed the slices and before those
  // that read the parameters, with no synchronization of the device (torch's current stream).
  if (choice.kind == DeviceKind::kCuda && stream != 0)
    return make_cuda_backend_on_stream<T>(choice.index, reinterpret_cast<void*>(stream));
  return make_backend<T>(choice);
}

template <typename T>
inline std::unique_ptr<Backend<T>> backend_for(const ForeignStepSpec& spec) {
  return backend_on<T>(spec.device, spec.stream);
}

// Whether an array handed over by DLPack lives where `backend` computes (a CUDA array on its
// device, or host memory for the CPU backend): its pointer is then the backend's to use.
template <typename Array>
inline bool on_backend_device(const Array& a, const DeviceQueue& backend) {
  const bool cuda = backend.device_kind() == DeviceKind::kCuda;
  return a.device_type() == (cuda ? nanobind::device::cuda::value : nanobind::device::cpu::value) &&
         (!cuda || a.device_id() == backend.device_index());
}

template <typename T>
inline typename ForeignSource<T>::Shape shape_of(const ForeignStepSpec& s) {
  typename ForeignSource<T>::Shape shape;
  shape.params = s.parameters;
  shape.residuals_per_unit = s.residuals_per_unit;
  shape.measured_bytes_per_unit = s.bytes_per_unit;
  shape.measured = s.footprint_measured;
  shape.slice_capped = s.options.max_slice_samples > 0;
  shape.groups.group_of = s.group_of;
  shape.groups.names = s.group_names;
  shape.groups.sizes = s.group_sizes;
  shape.groups.input_groups = s.input_groups;
  if (shape.groups.count() == 0) {  // one group: ard degenerates to bayesian's single ρ
    shape.groups.group_of.assign(s.parameters, 0);
    shape.groups.names = {"parameters"};
    shape.groups.sizes = {s.parameters};
  }
  if (shape.groups.group_of.size() != s.parameters ||
      shape.groups.sizes.size() != shape.groups.names.size())
    throw InvalidArgument(
        fmt::format("relevance groups: {} group indices for {} parameters, {} "
                    "sizes for {} names",
                    shape.groups.group_of.size(), s.parameters, shape.groups.sizes.size(),
                    shape.groups.names.size()));
  return shape;
}

}  // namespace lmtrain::python
