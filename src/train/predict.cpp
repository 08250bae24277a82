#include "lmtrain/train/predict.h"

#include <fmt/format.h>

#include <algorithm>

#include "lmtrain/core/error.h"

namespace lmtrain {

template <typename T>
std::vector<T> predict(const Sequential<T>& model, const T* params, const T* x, std::size_t samples,
                       std::size_t chunk) {
  Backend<T>& backend = model.backend();
  ForwardState<T> state;
  std::vector<T> out(samples * model.outputs());
  chunk = std::max<std::size_t>(chunk, 1);
  for (std::size_t first = 0; first < samples; first += chunk) {
    const std::size_t count = std::min(chunk, samples - first);
    const T* z = model.forward(params, x + first * model.inputs(), count, state, false);
    backend.copy_to_host(z, out.data() + first * model.outputs(), count * model.outputs());
  }
  return out;
}

template <typename T>
std::vector<T> predict(const ModelSpec& spec, const std::vector<T>& params, const std::vector<T>& x,
                       Backend<T>& backend) {
  const Sequential<T> model(spec, backend);
  if (params.size() != model.num_params())
    throw InvalidArgument(fmt::format("predict: {} parameters given, the model {} has {}",
                                      params.size(), spec.describe(), model.num_params()));
  if (x.size() % model.inputs() != 0)
    throw InvalidArgument(
        fmt::format("predict: {} input values are not whole samples of the model's {} inputs",
                    x.size(), model.inputs()));
  DeviceBuffer<T> xd = backend.allocate(x.size()), theta = backend.allocate(params.size());
  backend.copy_from_host(x.data(), xd.data(), x.size());
  backend.copy_from_host(params.data(), theta.data(), params.size());
  return predict(model, theta.data(), xd.data(), x.size() / model.inputs());
}

template <typename T>
double total_objective(const Sequential<T>& model, const Loss<T>& loss, const T* params, const T* x,
                       const T* y, std::size_t first, std::size_t rows, std::size_t chunk,
                       ForwardState<T>& state, DeviceBuffer<double>& objectives) {
  const std::size_t in = model.inputs();
  chunk = std::max<std::size_t>(chunk, 1);
  const std::size_t chunks = (rows + chunk - 1) / chunk;
  if (chunks == 0) return 0.0;
  objectives.reserve(model.backend().memory(), chunks);
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t begin = first + k * chunk, count = std::min(chunk, first + rows - begin);
    const T* z = model.forward(params, x + begin * in, count, state, false);
    loss.objective(count, z, y + begin * loss.target_columns(), objectives.data() + k);
  }
  std::vector<double> host(chunks);
  model.backend().read_scalars(objectives.data(), host.data(), chunks);
  double f = 0;
  for (const double chunk_objective : host) f += chunk_objective;
  return f;
}

template <typename T>
double evaluate(const ModelSpec& spec, const LossOptions& loss_options,
                const std::vector<T>& params, const Dataset<T>& data, Backend<T>& backend) {
  const Sequential<T> model(spec, backend);
  const Loss<T> loss(loss_options, model.outputs(), backend, !data.weights.empty());
  data.validate("evaluation data");
  if (params.size() != model.num_params() || data.inputs != model.inputs() ||
      data.outputs != model.outputs())
    throw InvalidArgument(fmt::format(
        "evaluate: {} parameters and data of {} inputs and {} outputs, but the model {} has {} "
        "parameters, {} inputs and {} outputs",
        params.size(), data.inputs, data.outputs, spec.describe(), model.num_params(),
        model.inputs(), model.outputs()));
  const std::vector<T> packed =
      loss.sample_weighted() ? data.targets_with_weights() : std::vector<T>();
  const std::vector<T>& targets = loss.sample_weighted() ? packed : data.y;
  DeviceBuffer<T> x = backend.allocate(data.x.size()), y = backend.allocate(targets.size()),
                  theta = backend.allocate(params.size());
  backend.copy_from_host(data.x.data(), x.data(), data.x.size());
  backend.copy_from_host(targets.data(), y.data(), targets.size());
  backend.copy_from_host(params.data(), theta.data(), params.size());
  ForwardState<T> state;
  DeviceBuffer<double> objectives;
  const std::size_t chunk = std::min<std::size_t>(data.samples, 4096);
  return loss.reported_of_weight(total_objective(model, loss, theta.data(), x.data(), y.data(), 0,
                                                 data.samples, chunk, state, objectives),
                                 data.total_weight());
}

#define LMTRAIN_INSTANTIATE(T)                                                                 \
  template std::vector<T> predict<T>(const Sequential<T>&, const T*, const T*, std::size_t,    \
                                     std::size_t);                                             \
  template std::vector<T> predict<T>(const ModelSpec&, const std::vector<T>&,                  \
                                     const std::vector<T>&, Backend<T>&);                      \
  template double total_objective<T>(const Sequential<T>&, const Loss<T>&, const T*, const T*, \
                                     const T*, std::size_t, std::size_t, std::size_t,          \
                                     ForwardState<T>&, DeviceBuffer<double>&);                 \
  template double evaluate<T>(const ModelSpec&, const LossOptions&, const std::vector<T>&,     \
                              const Dataset<T>&, Backend<T>&);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain
