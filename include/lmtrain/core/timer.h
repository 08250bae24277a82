// Wall-clock accounting per phase of an LM step, fed by scoped timers (as Ceres' Summary does).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace lmtrain {

enum class Phase : std::size_t {
  kForward = 0,      // forward pass that keeps activations, residuals and seeds
  kJacobian,         // backward seeds and Jacobian slice assembly
  kNormalEquations,  // SYRK / GEMV accumulation of A = JᵀJ and g = Jᵀr (or JJᵀ for the dual)
  kFactorization,    // damping, factorization and triangular solves (every retry)
  kTrialEvaluation,  // forward pass at a trial point
  kGeodesic,         // geodesic acceleration: residuals at θ ± h·v, Jᵀr_vv, its solve
  kValidation,       // epoch-end evaluation of training and validation loss
  kCommunication,    // all-reduce of A, g and scalars between ranks
  kRecords,          // checkpoints and the run's record files, written by the caller's hooks
  kOther,
  kCount
};

constexpr std::string_view phase_name(Phase p) {
  constexpr std::array<std::string_view, static_cast<std::size_t>(Phase::kCount)> names = {
      "forward",
      "jacobian",
      "normal equations (syrk)",
      "factorization + solve",
      "trial evaluation",
      "geodesic acceleration",
      "epoch evaluation",
      "communication",
      "checkpoints and records",
      "other"};
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
  // Phase by phase, what this table holds beyond `earlier` (a snapshot of the same table).
  PhaseTimes since(const PhaseTimes& earlier) const {
    PhaseTimes d;
    for (std::size_t i = 0; i < seconds.size(); ++i) d.seconds[i] = seconds[i] - earlier.seconds[i];
    return d;
  }
};

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Times phases of work a device runs asynchronously, without making the host wait for it:
// begin() and end() mark points in the device's queue (CUDA events), and collect() adds the time
// between each pair to a PhaseTimes, waiting only for marks the host waits for anyway at the end
// of an LM step.  The CPU runs work as it is called, so its clock is the host clock.
class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  virtual void begin(Phase phase) = 0;
  virtual void end(Phase phase) = 0;
  // Adds every phase ended since the last collect() to `times`.
  virtual void collect(PhaseTimes& times) = 0;
};

class HostPhaseClock final : public PhaseClock {
 public:
  void begin(Phase) override { start_ = Clock::now(); }
  void end(Phase phase) override { pending_[phase] += seconds_since(start_); }
  void collect(PhaseTimes& times) override {
    for (std::size_t p = 0; p < pending_.seconds.size(); ++p)
      times.seconds[p] += pending_.seconds[p];
    pending_ = PhaseTimes{};
  }

 private:
  Clock::time_point start_ = Clock::now();
  PhaseTimes pending_;
};

// Marks the scope as one phase on a PhaseClock.
class ScopedDevicePhase {
 public:
  ScopedDevicePhase(PhaseClock& clock, Phase phase) : clock_(clock), phase_(phase) {
    clock_.begin(phase_);
  }
  ScopedDevicePhase(const ScopedDevicePhase&) = delete;
  ScopedDevicePhase& operator=(const ScopedDevicePhase&) = delete;
  ~ScopedDevicePhase() { clock_.end(phase_); }

 private:
  PhaseClock& clock_;
  Phase phase_;
};

// Adds the lifetime of the scope to one phase, on the host's clock: for work the host waits for
// (a collective, a scalar read).  Device work is timed with a PhaseClock instead.
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
