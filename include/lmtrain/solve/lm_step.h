// One Levenberg–Marquardt step on one batch:
//   1. linearize: F, A = JᵀJ, g = Jᵀr (or J, r for the dual form and CG), slice by slice, summed
//      over the ranks;
//   2. the penalty adds Rθ, R (Penalty); the damping object computes D (Damping); the linear
//      solver is prepared once;
//   3. up to max_attempts times: δ = (A + λD)⁻¹g (+ the geodesic correction); an invalid attempt
//      (failed factorization or non-finite δ) or a trial θ − lr·δ that does not lower F raises λ;
//      the first trial that lowers F is accepted and λ lowered.
// The gain ratio ρ = (F − F_trial) / (F − m(δ)) uses the Gauss–Newton model
//   F − m(δ) = lr·gᵀδ − ½lr²·δᵀAδ,  δᵀAδ = gᵀδ − λ·δᵀDδ   (from (A + λD)δ = g),
// so it costs two dot products and never touches A.
//
// The host reads the device's scalars once per step and once per attempt on one rank (a GPU
// idles through each read): the linearization's (F, the finiteness of g and A's diagonal,
// max |g|, D's scale, and the sums of up to kBlockSlots residual blocks — a PINN's conditions),
// then per attempt one read after the trial, which brings back the solve's scalars (the
// factorization's status, δ's finiteness, gᵀδ, δᵀDδ, δᵀδ), the geodesic correction's (its
// ratio test decided on the device: LinearAlgebra::axpy_if_ratio_holds) and the trial's (F
// there and the step's norm).  The correction and the trial run behind the solve without
// waiting for its verdict; an invalid δ's are discarded, so a failed factorization costs a
// trial it did not need (rare: none in 60–90 s of the Burgers, Poisson-2D and Allen–Cahn
// recipes; 3 in W2's 4 float32 steps).  Each group is queued into device doubles and read in
// one transfer (LinearAlgebra::read_scalars); a penalty's value at the trial rides the trial's
// read.  A penalty's linearization, CG's iterations and several ranks (which read the verdict
// before the trial, to broadcast it) add their own.
//
// With several ranks (Collectives) each rank linearizes its shard of the batch; F, g and A's
// packed upper triangle are summed (one all-reduce each), rank 0 solves the dense system and
// broadcasts δ with its validity, and a trial's F is one scalar all-reduce — so every rank takes
// the same decisions and holds the same parameters, bit for bit.  CG is collective: every rank
// iterates, summing one n-vector per iteration.  distributed_cholesky is collective too: A is
// never summed whole — each rank's slices reach the owners of A's blocks by reduce-scatters —,
// the ranks factor and solve together, and every rank receives δ.
//
// Each stop the step itself detects writes its own termination reason and message (as Ceres'
// *Reached() checks do); the trainer adds where in the run it happened.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lmtrain/solve/collectives.h"
#include "lmtrain/solve/damping.h"
#include "lmtrain/solve/distributed_cholesky.h"
#include "lmtrain/solve/geodesic_acceleration.h"
#include "lmtrain/solve/linear_solver.h"
#include "lmtrain/solve/linearization_source.h"
#include "lmtrain/solve/penalty.h"
#include "lmtrain/solve/recorded_work.h"
#include "lmtrain/solve/termination.h"

namespace lmtrain {

struct StepReport {
  bool accepted = false;
  int attempts = 0;  // solves performed
  int rejected = 0;  // valid trials that did not lower F
  int invalid = 0;   // failed factorizations / non-finite steps
  double objective_before = 0;
  double objective_after = 0;  // F after the step (= before if not accepted)
  // The data's part of objective_after as the step summed it (without the penalty): F of the
  // batch at the step's result.
  double data_objective_after = 0;
  double penalty_before = 0;  // the part of objective_before that is ½θᵀRθ (regularization)
  double penalty_after = 0;   // the part of objective_after that is ½θᵀRθ
  double lambda = 0;          // λ of the last solve
  double gain_ratio = 0;      // ρ of the accepted step
  double gradient_max_norm = 0;
  double step_norm = 0;       // ‖lr·δ‖₂ of the accepted step (or of the last rejected one)
  int linear_iterations = 0;  // CG iterations summed over the attempts
  int geodesic_applied = 0;   // attempts whose trial included the geodesic correction
  int geodesic_refused = 0;   // attempts whose correction failed the ratio test
  int geodesic_skipped = 0;   // attempts that did not compute it (GeodesicBackoff)
  double weight_decay = 0;  // ρ of the penalty ½ρ‖θ‖² this step used (0: none; ard: 0, see
                            // LmStepper::weight_decays())
  double effective_parameters = 0;  // γ of the evidence update after this step (bayesian: Σ
                                    // aᵢ/(aᵢ + ρ); ard: Σ γ_g; else 0)
  // Device→host reads the step waited for (DeviceQueue::host_reads of the model's backend and, in
  // mixed precision, the system's): each a stream synchronization on a GPU.
  int host_reads = 0;
  TerminationReason termination = TerminationReason::kNone;
  std::string message;  // why, when termination is set
  // The loss of each block the source declares (LinearizationSource::residual_blocks, in its
  // order and convention) at the step's linearization point — before the step's update, like
  // objective_before —, summed over the ranks.  Empty when the source declares none.
  std::vector<BlockLoss> block_losses;
};

// What the step carries from one step to the next: λ's schedule, where the geodesic backoff
// stands and the penalties' ρ.  A checkpoint stores it; a step rebuilt after an out-of-memory
// halving gets it back.
struct StepperState {
  DampingStrategy::State damping;
  GeodesicBackoff::State geodesic;
  // ρ per penalty group (one unless ard); bayesian and ard re-estimate them.  Empty in a state
  // handed to set_state: the penalty keeps its own.
  std::vector<double> weight_decays{0.0};

  // Where a step's schedule starts: λ = lambda_initial, ν = 2, no floor learned, no geodesic
  // backoff, and the penalty's own ρ (empty weight_decays).
  static StepperState initial(const SolverOptions& options);
  // Throws InvalidArgument naming the first field out of range: λ finite and > 0, ν ≥ 1, the
  // floor ≥ 0, the backoff's counts ≥ 0, every ρ finite and ≥ 0.  A state a caller hands back
  // (a checkpoint, lmtrain.torch's load_state_dict) is checked here before any step takes it.
  void validate() const;
};

// The step as the trainer drives it, whatever the system's precision.
template <typename T>
class LmStepper {
 public:
  virtual ~LmStepper() = default;
  virtual StepReport step(T* params, const T* x, const T* y, std::size_t batch,
                          PhaseTimes& times) = 0;
  // λ for the next step.
  virtual double lambda() const = 0;
  virtual StepperState state() const = 0;
  // Throws InvalidArgument when the weight decays do not fit this step's penalty.
  virtual void set_state(const StepperState& state) = 0;
  // γ per group from the last evidence update (bayesian, ard); empty before the first.
  virtual const std::vector<double>& effective_parameters() const = 0;
  // Peak bytes of the float64 backend the step owns in mixed precision (0 otherwise).
  virtual std::size_t system_peak_bytes() const { return 0; }
  // How the system's backend formed A and why (LinearAlgebra::normal_matrix_report).
  virtual std::string normal_matrix_report() const { return {}; }
};

template <typename T, typename S = T>
class LevenbergMarquardtStep final : public LmStepper<T> {
 public:
  // `solver_type` must be resolved (not auto).  `max_batch`: the most units (samples) this rank
  // linearizes at once (its shard).  `comm` may be null (one rank).  T is the model's precision
  // (parameters, activations, J); S the system's (A, g, δ and the solve): S = double with
  // T = float is mixed precision, and the step then owns a float64 backend on the source's
  // device.  The source must outlive the step.
  LevenbergMarquardtStep(const SolverOptions& options, LinearSolverType solver_type,
                         LinearizationSource<T>& source, std::size_t slice_samples,
                         std::size_t max_batch, dist::Communicator* comm = nullptr);

  // Elements the step allocates itself (δ, the trial point, in mixed precision δ rounded to T,
  // and the scalars it reads), for the memory plan: in the model's precision and in the
  // system's.  `distributed_primal`: several ranks (or NCCL) summing a formed A, which needs its
  // packed triangle (not with distributed_cholesky, whose A is never formed whole; add its
  // n-vector of A's diagonal instead).
  static std::size_t model_elements(std::size_t n) { return std::is_same_v<T, S> ? n : 2 * n; }
  static std::size_t system_elements(std::size_t n, bool distributed_primal) {
    return n + (distributed_primal ? n * (n + 1) / 2 : 0) +
           (kSlots + kBlockSlots) * sizeof(double) / sizeof(S);
  }

  // Performs the step on params (device, n values), updating them in place when accepted.
  StepReport step(T* params, const T* x, const T* y, std::size_t batch, PhaseTimes& times) override;

  double lambda() const override { return damping_.lambda(); }
  StepperState state() const override {
    return {damping_.state(), backoff_.state(), penalty_->weight_decays()};
  }
  void set_state(const StepperState& state) override;
  const std::vector<double>& effective_parameters() const override {
    return penalty_->effective_parameters();
  }
  std::size_t system_peak_bytes() const override {
    return system_owned_ ? system_owned_->memory().peak_bytes_in_use() : 0;
  }
  // How A was formed (the system's backend), how mixed precision widened J's rows, how the solver
  // launched its attempts, and which options were ignored: a line each, where there is
  // something to say.
  std::string normal_matrix_report() const override {
    std::string out = system_.normal_matrix_report();
    const std::string solver = solver_->report();
    const std::string trial = trial_work_ ? trial_work_->report() : std::string();
    const std::string geodesic = geodesic_work_ ? geodesic_work_->report() : std::string();
    for (const std::string* line : {&builder_.widening_report(), &solver, &trial, &geodesic,
                                    &graphs_unrecorded_, &options_ignored_})
      if (!line->empty()) out += (out.empty() ? "" : "\n") + *line;
    return out;
  }
  const NormalEquations<S>& normal_equations() const { return ne_; }
  LinearSolver<S>& linear_solver() { return *solver_; }
  std::size_t slice_samples() const { return builder_.slice_samples(); }

 private:
  static constexpr bool kMixed = !std::is_same_v<T, S>;
  static LinearAlgebra<S>* own_system(LinearizationSource<T>& source,
                                      std::unique_ptr<LinearAlgebra<S>>& owned);

  // The device doubles the step's reductions leave their results in, read back one group per
  // decision.  A vector's norms take three (LinearAlgebra::vector_norms: non-finite count,
  // max |x|, Σx²).
  enum Slot : std::size_t {
    kObjective = 0,        // F at the linearization point
    kGradient = 1,         // g's norms
    kDiagonal = 4,         // A's diagonal's norms
    kDamping = 7,          // D's norms: the largest entry scales the damping's floor
    kDelta = 10,           // δ's norms
    kGradientDelta = 13,   // gᵀδ
    kDeltaDamped = 14,     // δᵀDδ
    kStatus = 15,          // the factorization's status (LinearSolver::solve_into)
    kCorrection = 16,      // the geodesic correction's norms, then whether it was kept
    kTrialObjective = 20,  // F at the trial point
    kStep = 21,            // the trial's δ's norms
    kPenalty = 24,         // what Penalty::value_into leaves for the trial's penalty
    kParamNorm = 25,       // θᵀθ (the parameter tolerance)
    kSlots = 26
  };
  // Slots after kSlots for the sums of up to this many residual blocks (a PINN's conditions),
  // read with the linearization's scalars; a source with more reads each block's sum alone.
  static constexpr std::size_t kBlockSlots = 8;
  // What the linearization's read gives.
  struct Linearization {
    double objective = 0;      // F summed over the ranks
    bool finite = true;        // g and A's diagonal (or its gathered copy)
    double gradient_max = 0;   // ‖g‖∞
    double damping_scale = 1;  // max D_ii (1 when A is not formed)
  };
  // What an attempt's scalars give, for a valid δ.
  struct Attempt {
    double predicted = 0;  // F − m(δ)
  };
  // An attempt's δ as solve() leaves it (nullopt: invalid, known on the host): its scalars read
  // already (`read`, valid), or queued at kDelta…kStatus (`read` empty: one rank, where they
  // are read with the trial's — the correction and the trial run behind the solve without
  // waiting for its verdict, and an invalid δ's are discarded).
  struct Solved {
    std::optional<Attempt> read;
    bool status_on_device = false;
  };
  // The geodesic correction of an attempt: off, skipped by the backoff, queued (its outcome at
  // kCorrection + 3, read with the trial's scalars), or decided (several ranks).
  enum class Correction { kOff, kSkipped, kQueued, kApplied, kRefused };
  // What a trial's read gives.
  struct Trial {
    double data = 0;     // F of the data at θ − lr·δ, summed over the ranks
    double penalty = 0;  // ½θᵀRθ there (read at kPenalty when `penalty_read`)
    bool penalty_read = false;
    double step_norm = 0;   // ‖lr·δ‖₂ of the δ tried
    double param_norm = 0;  // ‖θ‖₂ (only with a parameter tolerance)
  };

  StepReport run(T* params, const T* x, const T* y, std::size_t batch, PhaseTimes& times);
  PhaseClock& system_clock() { return kMixed ? *system_clock_ : *model_clock_; }
  // Reads of the step's backends so far (DeviceQueue::host_reads).
  std::uint64_t host_reads() const {
    return backend_.host_reads() + (kMixed ? system_.host_reads() : 0);
  }
  double* slot(std::size_t s) { return scalars_.data() + s; }
  // Slots [first, last) read in one transfer, after the work queued on both queues (F and θᵀθ
  // are the model queue's); the host copies, indexed by slot.
  const double* read(std::size_t first, std::size_t last);
  // A (or J) and g of the batch, summed over the ranks on the device; F as the builder gives it
  // (nullopt: left at kObjective).
  std::optional<double> linearize(const T* params, const T* x, const T* y, std::size_t batch);
  // The linearization's read: F (from kObjective unless `local_objective` has it), summed with
  // the batch over the ranks, g's and A's figures, D's scale when `damping_scaled`, and the
  // residual blocks' sums queued at kSlots… (`block_sums` of them).
  Linearization read_linearization(std::optional<double> local_objective, std::size_t batch,
                                   bool damping_scaled, std::size_t block_sums);
  // After a penalty changed g and A: D again, and ‖g‖∞ and D's scale in a second read.
  std::pair<double, double> read_penalized();
  // The source's residual blocks at the linearization point, checked against its batch, each
  // block's Σr² queued at kSlots + k when there are at most kBlockSlots of them.
  std::vector<ResidualBlock> queue_block_sums();
  // Their losses, summed over the ranks (one all-reduce of a value per block; nothing at all
  // without blocks): from the linearization's read, or each read alone past kBlockSlots.
  std::vector<BlockLoss> block_losses(const std::vector<ResidualBlock>& blocks);
  // D, its norms left at kDamping (returns whether it left them), once per step.
  bool prepare_damping();
  // The solver's preparation, once per step; false when the solver cannot be prepared.
  bool prepare_solver();
  // δ for λ on every rank (rank 0 solves a dense system and broadcasts) and what the attempt
  // decides with; nullopt when δ is invalid and the host knows it already.
  std::optional<Solved> solve(bool prepared, double lambda, StepReport& report);
  // δ's norms, gᵀδ and δᵀDδ queued at kDelta…kDeltaDamped.
  void attempt_norms();
  // The attempt's figures from the host copies of kDelta…kStatus: nullopt when δ is not finite
  // or the factorization failed (`status_on_device`), else the Gauss–Newton model's reduction
  // F − m(δ) for λ.
  std::optional<Attempt> attempt_of(double lambda, bool status_on_device) const;
  // The geodesic correction of the attempt's δ (identical on every rank), when due.
  Correction accelerate(const T* params);
  // The backoff's and the report's account of a valid attempt's correction.
  void record(Correction correction, StepReport& report);
  // The trial at θ − lr·δ and the norms the decision needs, read in one transfer from slot
  // `first` on (with the attempt's and the correction's scalars when they are pending).
  Trial trial(const T* params, std::size_t first);
  // Takes the trial: gain ratio, λ, θ ← trial, the evidence update, the convergence checks.
  void accept(T* params, double f0, const Trial& trial, double predicted, StepReport& report,
              PhaseTimes& times);
  // δ in the model's precision for a trial or a derivative along it: δ itself, or rounded to T
  // once (mixed precision).
  const T* model_delta();
  // SolverOptions::cuda_graphs beyond the solver's attempt: the trial's and the geodesic
  // correction's work from recordings (RecordedWork), where the step runs on one queue and one
  // rank without a penalty; else graphs_unrecorded_ says why not.
  void plan_recorded_work();
  // The key of the trial's (`geodesic`: the correction's) work at `params`: what its calls are
  // given.  nullopt where that work is not recorded (then queued call by call).
  std::optional<RecordedWork::Key> attempt_key(const T* params, bool geodesic);
  bool solves_here() const { return collectives_.is_root() || collective_solver(); }
  bool collective_solver() const {
    return solver_type_ == LinearSolverType::kCg ||
           solver_type_ == LinearSolverType::kDistributedCholesky;
  }
  // The distributed A of distributed_cholesky (null for the other solvers), and the solver.
  static std::unique_ptr<dist::DistributedNormalMatrix<S>> make_distributed(
      const SolverOptions& options, LinearSolverType type, LinearAlgebra<S>& system, std::size_t n,
      dist::Communicator* comm);
  std::unique_ptr<LinearSolver<S>> make_solver(std::size_t max_batch);

  // The stop checks; each writes its reason and message into the report when it holds.
  bool non_finite_system(double f0, bool system_finite, StepReport& report) const;
  bool gradient_tolerance_reached(StepReport& report) const;
  bool function_tolerance_reached(double f0, double f1, StepReport& report) const;
  bool parameter_tolerance_reached(double step_norm, double param_norm, StepReport& report) const;
  bool lambda_above_max(bool can_grow, StepReport& report) const;

  SolverOptions options_;
  // Why SolverOptions::tf32 or normal_matrix were not applied (empty: applied, or not asked).
  std::string options_ignored_;
  LinearAlgebra<T>& backend_;
  std::unique_ptr<LinearAlgebra<S>>
      system_owned_;  // mixed precision: S's backend on the same device
  LinearAlgebra<S>& system_;
  LinearizationSource<T>& source_;
  LinearSolverType solver_type_;
  Collectives<S> collectives_;
  NormalEquationsBuilder<T, S> builder_;
  NormalEquations<S> ne_;
  std::unique_ptr<dist::DistributedNormalMatrix<S>> distributed_;
  std::unique_ptr<LinearSolver<S>> solver_;
  Damping<S> damping_;
  // What λ is multiplied by in the system: 1, or the step's samples over all ranks
  // (SolverOptions::damping_per_sample).  Set by linearize().
  double lambda_unit_ = 1;
  std::unique_ptr<Penalty<T, S>> penalty_;
  std::unique_ptr<GeodesicAcceleration<T, S>> geodesic_;  // null when off (see solver_options.h)
  GeodesicBackoff backoff_;                               // which attempts compute the correction
  // SolverOptions::cuda_graphs: the trial's and the correction's work (null: queued call by call).
  std::unique_ptr<RecordedWork> trial_work_, geodesic_work_;
  bool correction_queued_ = false;  // what the correction's work decided when it last ran
  std::string graphs_unrecorded_;   // why some of that work is not recorded
  // Phases of the model's queue, and of the system's in mixed precision (its own queue); read
  // into the step's PhaseTimes once per step.
  std::unique_ptr<PhaseClock> model_clock_, system_clock_;
  DeviceBuffer<S> delta_, packed_;
  DeviceBuffer<T> trial_;
  DeviceBuffer<double> scalars_;  // kSlots + kBlockSlots, on the system's device
  std::array<double, kSlots + kBlockSlots> host_scalars_{};  // their host copies
  DeviceBuffer<T> delta_model_;  // δ rounded to T (mixed precision only)
};

// The step for options.system_precision: LevenbergMarquardtStep<T, double> for a float model
// with SystemPrecision::kFloat64, LevenbergMarquardtStep<T> otherwise.
template <typename T>
std::unique_ptr<LmStepper<T>> make_lm_step(const SolverOptions& options,
                                           LinearSolverType solver_type,
                                           LinearizationSource<T>& source,
                                           std::size_t slice_samples, std::size_t max_batch,
                                           dist::Communicator* comm = nullptr);

}  // namespace lmtrain
