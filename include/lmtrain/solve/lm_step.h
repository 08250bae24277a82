// One Levenberg–Marquardt step on one batch:
//   1. linearize: F, A = JᵀJ, g = Jᵀr (or J, r for the dual form), slice by slice;
//   2. D = I or clamp(diag A); prepare the linear solver once;
//   3. up to max_attempts times: δ = (A + λD)⁻¹g; an invalid step (failed factorization or
//      non-finite δ) or a trial θ − lr·δ that does not lower F raises λ; the first trial that
//      lowers F is accepted and λ lowered.
// The gain ratio ρ = (F − F_trial) / (F − m(δ)) uses the Gauss–Newton model
//   F − m(δ) = lr·gᵀδ − ½lr²·δᵀAδ,  δᵀAδ = gᵀδ − λ·δᵀDδ   (from (A + λD)δ = g),
// so it costs two dot products and never touches A.
//
// With several ranks (a communicator of size > 1) each rank linearizes its shard of the batch;
// F, g and A's packed upper triangle are summed (one all-reduce each), rank 0 solves the dense
// system and broadcasts δ with its validity, and a trial's F is one scalar all-reduce — so every
// rank takes the same decisions and holds the same parameters, bit for bit.  CG is collective:
// every rank iterates, summing one n-vector per iteration.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "lmtrain/solve/damping.h"
#include "lmtrain/solve/geodesic_acceleration.h"
#include "lmtrain/solve/linear_solver.h"
#include "lmtrain/solve/termination.h"

namespace lmtrain {

struct StepReport {
  bool accepted = false;
  int attempts = 0;         // solves performed
  int rejected = 0;         // valid trials that did not lower F
  int invalid = 0;          // failed factorizations / non-finite steps
  double objective_before = 0;
  double objective_after = 0;  // F after the step (= before if not accepted)
  double penalty_after = 0;    // the part of objective_after that is ½ρ‖θ‖² (regularization)
  double lambda = 0;           // λ of the last solve
  double gain_ratio = 0;       // ρ of the accepted step
  double gradient_max_norm = 0;
  double step_norm = 0;        // ‖lr·δ‖₂ of the accepted step
  int linear_iterations = 0;   // CG iterations summed over the attempts
  int geodesic_applied = 0;    // attempts whose trial included the geodesic correction
  int geodesic_refused = 0;    // attempts whose correction failed the ratio test
  double weight_decay = 0;     // ρ of the penalty ½ρ‖θ‖² this step used (0: none; ard: 0, see
                               // LmStepper::weight_decays())
  double effective_parameters = 0;  // γ of the evidence update after this step (bayesian: Σ
                                    // aᵢ/(aᵢ + ρ); ard: Σ γ_g; else 0)
  TerminationReason termination = TerminationReason::kNone;
};

// The step as the trainer drives it, whatever the system's precision.
template <typename T>
class LmStepper {
 public:
  virtual ~LmStepper() = default;
  virtual StepReport step(T* params, const T* x, const T* y, std::size_t batch,
                          PhaseTimes& times) = 0;
  virtual DampingStrategy& damping() = 0;
  // Peak bytes of the float64 backend the step owns in mixed precision (0 otherwise).
  virtual std::size_t system_peak_bytes() const { return 0; }
  // ρ of the weight-decay penalty: one value (½ρ‖θ‖²; none, l2, bayesian) or, for ard, one per
  // ModelSpec::relevance_groups() group (½Σ ρ_g‖θ_g‖²).  Fixed for l2; re-estimated by bayesian
  // and ard, and then part of a checkpoint.
  virtual const std::vector<double>& weight_decays() const = 0;
  // Throws InvalidArgument when `rho` does not have weight_decays()'s size or holds a negative
  // or non-finite value.
  virtual void set_weight_decays(const std::vector<double>& rho) = 0;
  // γ per group from the last evidence update (bayesian, ard); empty before the first.
  virtual const std::vector<double>& effective_parameters() const = 0;
};

template <typename T, typename S = T>
class LevenbergMarquardtStep final : public LmStepper<T> {
 public:
  // `solver_type` must be resolved (not auto); `dual` must match it.
  // `max_batch`: the most samples this rank linearizes at once (its shard).  `comm` may be null
  // (one rank).  T is the model's precision (parameters, activations, J); S the system's (A, g,
  // δ and the solve): S = double with T = float is mixed precision, and the step then owns a
  // float64 backend on the engine's device.
  LevenbergMarquardtStep(const SolverOptions& options, LinearSolverType solver_type,
                         JacobianEngine<T>& engine, std::size_t slice_samples,
                         std::size_t max_batch, dist::Communicator* comm = nullptr);

  // Performs the step on params (device, n values), updating them in place when accepted.
  StepReport step(T* params, const T* x, const T* y, std::size_t batch,
                  PhaseTimes& times) override;

  DampingStrategy& damping() override { return *damping_; }
  std::size_t system_peak_bytes() const override {
    return system_owned_ ? system_owned_->memory().peak_bytes_in_use() : 0;
  }
  const std::vector<double>& weight_decays() const override { return rho_; }
  void set_weight_decays(const std::vector<double>& rho) override;
  const std::vector<double>& effective_parameters() const override { return gamma_; }
  const NormalEquations<S>& normal_equations() const { return ne_; }
  LinearSolver<S>& linear_solver() { return *solver_; }
  std::size_t slice_samples() const { return builder_.slice_samples(); }

 private:
  static constexpr bool kMixed = !std::is_same_v<T, S>;
  static Backend<S>* own_system(JacobianEngine<T>& engine, std::unique_ptr<Backend<S>>& owned);

  SolverOptions options_;
  Backend<T>& backend_;
  std::unique_ptr<Backend<S>> system_owned_;  // mixed precision: S's backend on the same device
  Backend<S>& system_;
  JacobianEngine<T>& engine_;
  NormalEquationsBuilder<T, S> builder_;
  std::unique_ptr<LinearSolver<S>> solver_;
  std::unique_ptr<DampingStrategy> damping_;
  std::unique_ptr<GeodesicAcceleration<T, S>> geodesic_;  // null when off or with the dual form
  // Sums over the ranks; no-ops with one rank.
  double sum(double local, PhaseTimes& times);
  void sum_device(S* data, std::size_t n, PhaseTimes& times);
  void broadcast_device(S* data, std::size_t n, PhaseTimes& times);
  // Several ranks; or NCCL even with one, so that a single GPU runs (and checks) the NCCL path
  // against the local communicator — its sums and broadcasts are then identities.
  bool distributed() const {
    return comm_ != nullptr && (comm_->size() > 1 || comm_->supports_device_buffers());
  }
  // Bayesian regularization's update of ρ after an accepted step (identical on every rank).
  void update_weight_decay(const T* params, double data_objective, StepReport& report,
                           PhaseTimes& times);
  // The same for ard, one ρ per group, from the diagonal of (A + R)⁻¹.
  void update_group_weight_decays(const T* params, double data_objective, StepReport& report,
                                  PhaseTimes& times);
  // ½Σ ρ_i θ_i² of `theta` (T, on the model's backend).  ard: leaves θ (in S) in tmp_ and ρ∘θ
  // in rho_theta_.
  double penalty(const T* theta);
  // penalty_ ← ρ_g(i) per parameter from rho_ (ard).
  void upload_group_penalty();
  bool grouped() const { return !group_of_.empty(); }
  // δ in the model's precision for a trial or a derivative along it: δ itself, or rounded to T
  // once (mixed precision).
  const T* model_delta();
  // The geodesic correction of the attempt's δ (identical on every rank); true when applied.
  bool accelerate(const T* params, double lr, PhaseTimes& times);

  NormalEquations<S> ne_;
  DeviceBuffer<S> delta_, d_, tmp_, packed_;
  DeviceBuffer<T> trial_;
  DeviceBuffer<T> delta_model_;  // δ rounded to T (mixed precision only)
  dist::Communicator* comm_ = nullptr;
  LinearSolverType solver_type_;
  std::vector<S> staging_;
  std::vector<double> rho_{0.0};  // ρ per penalty group (one unless ard)
  std::vector<double> gamma_;     // γ per group from the last evidence update
  // ard: the group of each parameter, the group sizes, ρ per parameter and ρ∘θ on the device.
  std::vector<std::uint32_t> group_of_;
  std::vector<std::size_t> group_sizes_;
  std::vector<S> penalty_host_;  // host staging of penalty_, kept across steps
  std::vector<T> theta_host_;    // θ on the host for the per-group ‖θ_g‖²
  DeviceBuffer<S> penalty_, rho_theta_;
  DeviceBuffer<S> eigen_work_, eigenvalues_;  // bayesian: A's eigenvalues; ard: diag((A + R)⁻¹)
  std::vector<S> eigenvalues_host_;
};

// The step for options.system_precision: LevenbergMarquardtStep<T, double> for a float model
// with SystemPrecision::kFloat64, LevenbergMarquardtStep<T> otherwise.
template <typename T>
std::unique_ptr<LmStepper<T>> make_lm_step(const SolverOptions& options,
                                           LinearSolverType solver_type, JacobianEngine<T>& engine,
                                           std::size_t slice_samples, std::size_t max_batch,
                                           dist::Communicator* comm = nullptr);

}  // namespace lmtrain
