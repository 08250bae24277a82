// Damping strategies: how λ reacts to accepted and rejected steps.  Formulas in solver_options.h.
#pragma once

#include <memory>

#include "lmtrain/solve/solver_options.h"

namespace lmtrain {

class DampingStrategy {
 public:
  virtual ~DampingStrategy() = default;
  double lambda() const { return lambda_; }
  // After an accepted step with gain ratio rho = actual / predicted reduction.
  virtual void accept(double rho) = 0;
  // After a rejected or invalid step.  Returns false when λ was already at lambda_max, i.e. it
  // cannot grow any further (a termination criterion).
  virtual bool reject() = 0;

  // Complete state, so checkpoints restore it exactly.
  struct State {
    double lambda = 0;
    double nu = 2;
  };
  virtual State state() const { return {lambda_, 2}; }
  virtual void set_state(const State& s) { lambda_ = s.lambda; }

  static std::unique_ptr<DampingStrategy> create(const SolverOptions& options);

 protected:
  explicit DampingStrategy(const SolverOptions& o) : options_(o), lambda_(o.lambda_initial) {}
  double clamp(double l) const;
  SolverOptions options_;
  double lambda_;
};

}  // namespace lmtrain
