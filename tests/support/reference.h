// Independent references shared by the tests: random problems, a central-difference Jacobian in
// double precision, and helpers to run the library's Jacobian engine end to end.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "lmtrain/lmtrain.h"
#include "lmtrain/nn/jacobian.h"
#include "lmtrain/train/engine_source.h"

namespace lmtrain::testing {

inline std::vector<double> random_vector(std::size_t n, Rng& rng, double scale = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

template <typename To>
std::vector<To> cast(const std::vector<double>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// max |a − b| / max |b|: a normwise relative error that is meaningful for matrices whose
// entries span many orders of magnitude.
inline double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Central differences of f: R^n → R^m at θ, step h·max(1, |θ_j|); returns m × n row-major.
inline std::vector<double> central_differences(
    const std::function<std::vector<double>(const std::vector<double>&)>& f,
    const std::vector<double>& theta, double h = 1e-6) {
  const std::size_t n = theta.size();
  const std::size_t m = f(theta).size();
  std::vector<double> jac(m * n);
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<double> plus = theta, minus = theta;
    const double step = h * std::max(1.0, std::fabs(theta[j]));
    plus[j] += step;
    minus[j] -= step;
    const auto fp = f(plus), fm = f(minus);
    for (std::size_t i = 0; i < m; ++i) jac[i * n + j] = (fp[i] - fm[i]) / (2 * step);
  }
  return jac;
}

// A network, loss and batch on one backend, with host-side access to what the engine computes.
template <typename T>
struct Problem {
  std::unique_ptr<Backend<T>> backend;
  std::unique_ptr<Sequential<T>> model;
  std::unique_ptr<Loss<T>> loss;
  std::unique_ptr<JacobianEngine<T>> engine;
  std::unique_ptr<EngineSource<T>> source;  // the engine as the LM step's linearization source
  DeviceBuffer<T> x, y, params;
  std::size_t batch = 0;

  Problem(const ModelSpec& spec, const LossOptions& loss_options, const std::vector<double>& xs,
          const std::vector<double>& ys, std::size_t batch_size)
      : Problem(make_cpu_backend<T>(), spec, loss_options, xs, ys, batch_size) {}
  // The same on another backend (the CUDA tests compare it with the CPU one).
  Problem(std::unique_ptr<Backend<T>> on, const ModelSpec& spec, const LossOptions& loss_options,
          const std::vector<double>& xs, const std::vector<double>& ys, std::size_t batch_size)
      : backend(std::move(on)), batch(batch_size) {
    model = std::make_unique<Sequential<T>>(spec, *backend);
    loss = std::make_unique<Loss<T>>(loss_options, model->outputs(), *backend);
    engine = std::make_unique<JacobianEngine<T>>(*model, *loss);
    source = std::make_unique<EngineSource<T>>(*engine);
    x = upload(xs);
    y = upload(ys);
    params = backend->allocate(model->num_params());
  }

  DeviceBuffer<T> upload(const std::vector<double>& v) {
    auto host = cast<T>(v);
    DeviceBuffer<T> d = backend->allocate(v.size());
    backend->copy_from_host(host.data(), d.data(), v.size());
    return d;
  }
  std::vector<double> download(const T* d, std::size_t n) {
    std::vector<T> host(n);
    backend->copy_to_host(d, host.data(), n);
    return std::vector<double>(host.begin(), host.end());
  }
  void set_params(const std::vector<double>& theta) {
    auto host = cast<T>(theta);
    backend->copy_from_host(host.data(), params.data(), host.size());
  }
  std::size_t rows() const { return batch * engine->residuals_per_sample(); }

  // Residuals at θ.
  std::vector<double> residuals(const std::vector<double>& theta) {
    set_params(theta);
    engine->linearize(params.data(), x.data(), y.data(), batch);
    return download(engine->residuals(), rows());
  }
  // Objective F at θ.
  double objective(const std::vector<double>& theta) {
    set_params(theta);
    return engine->linearize(params.data(), x.data(), y.data(), batch);
  }
  // Network outputs at θ (batch × outputs).
  std::vector<double> outputs(const std::vector<double>& theta) {
    set_params(theta);
    ForwardState<T> state;
    const T* z = model->forward(params.data(), x.data(), batch, state, false);
    return download(z, batch * model->outputs());
  }
  // Engine's Jacobian at θ built in slices of `slice` samples (rows × n).
  std::vector<double> jacobian(const std::vector<double>& theta, std::size_t slice = 0) {
    if (slice == 0) slice = batch;
    set_params(theta);
    engine->linearize(params.data(), x.data(), y.data(), batch);
    const std::size_t n = model->num_params(), R = engine->residuals_per_sample();
    DeviceBuffer<T> j = backend->allocate(rows() * n);
    for (std::size_t first = 0; first < batch; first += slice) {
      const std::size_t count = std::min(slice, batch - first);
      engine->jacobian_rows(params.data(), first, count, j.data() + first * R * n, n);
    }
    return download(j.data(), rows() * n);
  }
};

}  // namespace lmtrain::testing
