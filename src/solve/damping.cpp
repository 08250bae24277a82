#include "lmtrain/solve/damping.h"

#include <algorithm>
#include <cmath>

namespace lmtrain {
namespace {

class MultiplicativeDamping final : public DampingStrategy {
 public:
  explicit MultiplicativeDamping(const SolverOptions& o) : DampingStrategy(o) {}
  void accept(double /*rho*/) override { lambda_ = clamp(lambda_ * options_.lambda_decrease); }
  bool reject() override {
    if (lambda_ >= options_.lambda_max) return false;
    lambda_ = clamp(lambda_ * options_.lambda_increase);
    return true;
  }
};

class NielsenDamping final : public DampingStrategy {
 public:
  explicit NielsenDamping(const SolverOptions& o) : DampingStrategy(o) {}
  void accept(double rho) override {
    const double t = 2.0 * rho - 1.0;
    lambda_ = clamp(lambda_ * std::max(1.0 / 3.0, 1.0 - t * t * t));
    nu_ = 2.0;
  }
  bool reject() override {
    if (lambda_ >= options_.lambda_max) return false;
    lambda_ = clamp(lambda_ * nu_);
    nu_ = std::min(nu_ * 2.0, 0x1.0p60);
    return true;
  }
  State state() const override { return {lambda_, nu_}; }
  void set_state(const State& s) override {
    lambda_ = s.lambda;
    nu_ = s.nu;
  }

 private:
  double nu_ = 2.0;
};

}  // namespace

double DampingStrategy::clamp(double l) const {
  return std::clamp(l, options_.lambda_min, options_.lambda_max);
}

std::unique_ptr<DampingStrategy> DampingStrategy::create(const SolverOptions& options) {
  options.validate();
  if (options.damping == DampingType::kNielsen) return std::make_unique<NielsenDamping>(options);
  return std::make_unique<MultiplicativeDamping>(options);
}

}  // namespace lmtrain
