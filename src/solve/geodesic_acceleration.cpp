#include "lmtrain/solve/geodesic_acceleration.h"

namespace lmtrain {

template <typename T, typename S>
GeodesicAcceleration<T, S>::GeodesicAcceleration(const SolverOptions& options,
                                                 LinearizationSource<T>& source,
                                                 NormalEquationsBuilder<T, S>& builder,
                                                 const NormalEquations<S>& ne,
                                                 LinearAlgebra<S>& system,
                                                 std::size_t max_residuals)
    : ratio_(options.geodesic_ratio),
      step_(options.geodesic_step),
      source_(source),
      builder_(builder),
      backend_(source.model_backend()),
      system_(system),
      ne_(ne),
      plus_(backend_.allocate(max_residuals)),
      minus_(backend_.allocate(max_residuals)),
      point_(backend_.allocate(source.num_params())),
      rhs_(system.allocate(source.num_params())),
      accel_(system.allocate(source.num_params())) {}

template <typename T, typename S>
void GeodesicAcceleration<T, S>::second_derivative(const T* params, double lr, const T* delta) {
  const std::size_t n = source_.num_params();
  const std::size_t m = source_.batch() * source_.residuals_per_sample();
  if (m > 0) {
    // v = −lr·δ: θ + hv = θ − h·lr·δ and θ − hv = θ + h·lr·δ.
    const double hl = step_ * lr;
    backend_.add_scaled(n, params, static_cast<T>(-hl), delta, point_.data());
    source_.residuals_at(point_.data(), plus_.data());
    backend_.add_scaled(n, params, static_cast<T>(hl), delta, point_.data());
    source_.residuals_at(point_.data(), minus_.data());
    // r_vv = (r₊ + r₋ − 2r)/h², into plus_.
    backend_.axpy(m, T(1), minus_.data(), plus_.data());
    backend_.axpy(m, T(-2), source_.residuals(), plus_.data());
    // x + (1/h² − 1)·x = x/h²
    backend_.add_scaled(m, plus_.data(), static_cast<T>(1.0 / (step_ * step_) - 1.0), plus_.data(),
                        plus_.data());
  }
  builder_.jacobian_transpose_times(params, plus_.data(), ne_, rhs_.data());
}

template <typename T, typename S>
bool GeodesicAcceleration<T, S>::correct(LinearSolver<S>& solver, double lr,
                                         const double* delta_norms, S* delta, double* norms) {
  const std::size_t n = source_.num_params();
  if (!solver.solve_again(rhs_.data(), accel_.data())) return false;
  system_.vector_norms(n, accel_.data(), 1, norms);
  system_.axpy_if_ratio_holds(n, static_cast<S>(0.5 / lr), accel_.data(), delta, norms, delta_norms,
                              lr, ratio_, norms + 3);
  return true;
}

template class GeodesicAcceleration<float, float>;
template class GeodesicAcceleration<double, double>;
template class GeodesicAcceleration<float, double>;

}  // namespace lmtrain
