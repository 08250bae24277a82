// Forward passes of a trained network without a Trainer: outputs for new inputs, and the
// reported loss on a data set.  The command-line tool's predict and eval, the Trainer and the
// Python package all call these.
#pragma once

#include <vector>

#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/sequential.h"
#include "lmtrain/train/dataset.h"

namespace lmtrain {

// Network outputs (samples × outputs, host) for `samples` rows of inputs at `x` (device, samples ×
// inputs) with parameters at `params` (device), in forward passes of `chunk` samples.
template <typename T>
std::vector<T> predict(const Sequential<T>& model, const T* params, const T* x, std::size_t samples,
                       std::size_t chunk = 4096);
// The same from host vectors: x holds samples × spec.inputs() values.  Throws InvalidArgument
// when the sizes do not fit the model.
template <typename T>
std::vector<T> predict(const ModelSpec& spec, const std::vector<T>& params, const std::vector<T>& x,
                       Backend<T>& backend);

// Objective F of `params` (device) on rows [first, first + rows) of data at x, y (device), in
// forward passes of `chunk` samples reusing `state`.  Each chunk's F stays on the device (in
// `objectives`, grown to one double per chunk) until one read brings them all back; they are
// added in chunk order.
template <typename T>
double total_objective(const Sequential<T>& model, const Loss<T>& loss, const T* params, const T* x,
                       const T* y, std::size_t first, std::size_t rows, std::size_t chunk,
                       ForwardState<T>& state, DeviceBuffer<double>& objectives);

// The reported loss (PyTorch's mean reduction, core/loss_kind.h) of `params` on `data`.
template <typename T>
double evaluate(const ModelSpec& spec, const LossOptions& loss, const std::vector<T>& params,
                const Dataset<T>& data, Backend<T>& backend);

}  // namespace lmtrain
