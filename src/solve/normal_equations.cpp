#include "lmtrain/solve/normal_equations.h"

#include <algorithm>

namespace lmtrain {

template <typename T>
NormalEquationsBuilder<T>::NormalEquationsBuilder(JacobianEngine<T>& engine,
                                                  std::size_t slice_samples, std::size_t max_batch,
                                                  bool store_jacobian)
    : engine_(engine),
      backend_(engine.model_backend()),
      slice_samples_(std::max<std::size_t>(1, slice_samples)),
      max_batch_(max_batch),
      store_jacobian_(store_jacobian) {
  const std::size_t n = engine_.num_params(), R = engine_.residuals_per_sample();
  engine_.reserve(max_batch_, slice_samples_);
  if (!store_jacobian_) slice_ = backend_.allocate(slice_samples_ * R * n);
}

template <typename T>
double NormalEquationsBuilder<T>::build(const T* params, const T* x, const T* y, std::size_t batch,
                                        NormalEquations<T>& ne, PhaseTimes& times) {
  const std::size_t n = engine_.num_params(), R = engine_.residuals_per_sample();
  const std::size_t m = batch * R;
  ne.n = n;
  ne.m = m;
  ne.jacobian_stored = store_jacobian_;
  ne.g.reserve(backend_.memory(), n);
  if (store_jacobian_) {
    ne.j.reserve(backend_.memory(), max_batch_ * R * n);
    ne.r.reserve(backend_.memory(), max_batch_ * R);
  } else {
    // Only A's upper triangle is ever written; zero a fresh buffer once so the other triangle
    // holds defined values for anything that copies the whole matrix.
    const T* before = ne.a.data();
    ne.a.reserve(backend_.memory(), n * n);
    if (ne.a.data() != before) backend_.fill(ne.a.data(), n * n, T(0));
  }

  if (batch == 0) {
    // A rank whose shard of this batch is empty contributes zeros to the sums.
    engine_.clear_batch();
    ne.objective = 0;
    backend_.fill(ne.g.data(), n, T(0));
    if (!store_jacobian_) backend_.fill(ne.a.data(), n * n, T(0));
    return 0;
  }
  double objective = 0;
  {
    ScopedPhase timer(times, Phase::kForward);
    objective = engine_.linearize(params, x, y, batch);
    backend_.synchronize();
  }
  ne.objective = objective;
  const T* r = engine_.residuals();

  if (store_jacobian_) {
    {
      ScopedPhase timer(times, Phase::kJacobian);
      for (std::size_t first = 0; first < batch; first += slice_samples_) {
        const std::size_t count = std::min(slice_samples_, batch - first);
        engine_.jacobian_rows(params, first, count, ne.j.data() + first * R * n, n);
      }
      backend_.copy(r, ne.r.data(), m);
      backend_.synchronize();
    }
    ScopedPhase timer(times, Phase::kNormalEquations);
    backend_.gemv(Trans::kYes, m, n, T(1), ne.j.data(), n, r, T(0), ne.g.data());
    backend_.synchronize();
    return objective;
  }

  for (std::size_t first = 0; first < batch; first += slice_samples_) {
    const std::size_t count = std::min(slice_samples_, batch - first);
    const std::size_t rows = count * R;
    {
      ScopedPhase timer(times, Phase::kJacobian);
      engine_.jacobian_rows(params, first, count, slice_.data(), n);
      backend_.synchronize();
    }
    ScopedPhase timer(times, Phase::kNormalEquations);
    const T beta = first == 0 ? T(0) : T(1);
    backend_.syrk_ata(n, rows, T(1), slice_.data(), n, beta, ne.a.data());
    backend_.gemv(Trans::kYes, rows, n, T(1), slice_.data(), n, r + first * R, beta, ne.g.data());
    backend_.synchronize();
  }
  return objective;
}

template class NormalEquationsBuilder<float>;
template class NormalEquationsBuilder<double>;

}  // namespace lmtrain
