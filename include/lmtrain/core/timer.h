// Wall-clock accounting per phase of an LM step, fed by scoped timers (as Ceres' Summary does).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace lmtrain {

enum class Phase : std::size_t {
  kForward = 0,       // forward pass that keeps activations, residuals and seeds
  kJacobian,          // backward seeds and Jacobian slice assembly
  kNormalEquations,   // SYRK / GEMV accumulation of A = JᵀJ and g = Jᵀr (or JJᵀ for the dual)
  kFactorization,     // damping, factorization and triangular solves (every retry)
  kTrialEvaluation,   // forward pass at a trial point
  kGeodesic,          // geodesic acceleration: residuals at θ ± h·v, Jᵀr_vv, its solve
  kValidation,        // epoch-end evaluation of training and validation loss
  kCommunication,     // all-reduce of A, g and scalars between ranks
  kOther,
  kCount
};

constexpr std::string_view phase_name(Phase p) {
  constexpr std::array<std::string_view, static_cast<std::size_t>(Phase::kCount)> names = {
      "forward", "jacobian", "normal equations (syrk)", "factorization + solve",
      "trial evaluation", "geodesic acceleration", "epoch evaluation", "communication", "other"};
  return names[static_cast<std::size_t>(p)];
}

struct PhaseTimes {
  std::array<double, static_cast<std::size_t>(Phase::kCount)> seconds{};
  double& operator[](Phase p) { return seconds[static_cast<std::size_t>(p)]; }
  double operator[](Phase p) const { return seconds[static_cast<std::size_t>(p)]; }
  double total() const {
    double t = 0;
    for (double s : seconds) t += s;
    return t;
  }
};

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Adds the lifetime of the scope to one phase.  A backend that runs asynchronously (CUDA) must
// synchronize before the scope closes for the figure to mean anything; the Trainer does so.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes& times, Phase phase) : times_(times), phase_(phase) {}
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;
  ~ScopedPhase() { times_[phase_] += seconds_since(start_); }

 private:
  PhaseTimes& times_;
  Phase phase_;
  Clock::time_point start_ = Clock::now();
};

}  // namespace lmtrain
