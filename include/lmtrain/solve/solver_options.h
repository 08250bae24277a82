// Options of the Levenberg–Marquardt step.  Every field has its default in-class and states its
// meaning; validate() names the field, its value and the constraint it violates.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "lmtrain/backend/normal_matrix_method.h"
#include "lmtrain/core/loss_kind.h"

namespace lmtrain {

// How (JᵀJ + λD)δ = Jᵀr is solved.
enum class LinearSolverType {
  // dual when the batch has fewer residuals than parameters and D = I, else cholesky.
  kAuto,
  // Dense Cholesky of A + λD (LAPACK potrf/potrs); each λ retry refactors: n³/3 flops.
  kCholesky,
  // δ = Jᵀ(JJᵀ + λI)⁻¹r with J stored whole: an m × m system, for m < n (D = I only).
  kDual,
  // One symmetric eigendecomposition D^{-½}AD^{-½} = QΛQᵀ per step (4n³/3·c flops); each λ retry
  // then costs O(n²): δ = D^{-½}Q(Λ + λI)⁻¹QᵀD^{-½}g.  Pays off when retries are frequent.
  kEigen,
  // Matrix-free preconditioned conjugate gradients on (JᵀJ + λD)δ = g with J kept where it was
  // built (row-distributed over ranks): each iteration is one Jᵀ(Jp) and one n-vector all-reduce.
  // Jacobi preconditioner diag(JᵀJ) + λD.  Inexact: stops once ‖residual‖ ≤ cg_forcing·‖g‖
  // (the forcing sequence of inexact Newton methods; Ceres' CGNR uses the same test).  For
  // models whose A = JᵀJ does not fit in memory.
  kCg,
  // Cholesky of A + λD with A sharded over the ranks (DESIGN.md §6): A lives 2-D block-cyclically
  // on a process grid of the ranks (distributed_block_size blocks), each rank's SYRK
  // contributions reach their owners by reduce-scatters, and the ranks factor it together
  // (ScaLAPACK pdpotrf/pdpotrs on CPU ranks, cuSOLVERMp on GPU ranks).  No rank holds all of A:
  // each holds about 2n²/R values (A and its factor, so that a λ retry starts from A again).
  // For models whose A fits the ranks together but not one of them.  Not with bayesian or ard,
  // whose evidence updates read A's spectrum on one rank.
  kDistributedCholesky,
};

enum class DampingType {
  // λ ← λ·decrease on success, λ·increase on a rejected trial (cuPyLMA, torch-levenberg-
  // marquardt, MATLAB trainlm defaults: λ₀ = 1e-3, ×10 up, ×0.1 down), and the peers' stop: a
  // rejection that raises λ to lambda_max ends the step (and training) without an attempt there.
  // Kept for comparisons with them (lmtrain.torch.LMA runs it as cuPyLMA does, with
  // damping_per_sample and restart_lambda_at_max).  An invalid attempt (failed factorization) is
  // handled as under nielsen (DampingStrategy::invalid), not as a rejection.
  kMultiplicative,
  // Nielsen (1999), as in Madsen, Nielsen & Tingleff, "Methods for non-linear least squares
  // problems" (2004) §3.2: on success λ ← λ·max(c, 1 − (2ρ − 1)³), ν ← 2; on failure λ ← λ·ν,
  // ν ← 2ν.  ρ = actual / predicted reduction of the objective; c = 0.7 here against Nielsen's
  // 1/3 (fewer rejected attempts for the same losses: src/solve/damping.cpp).  The default: on
  // W1 (float32, 50 epochs, 20 seeds, without geodesic acceleration) median MSE 2.7e-7, worst
  // 1.1e-6 and 1.20 attempts per accepted step, against 1.1e-6, 1.8e-4 and 2.00 for
  // multiplicative; on W2 (20 epochs) 2.4e-5 against 4.9e-4.
  kNielsen,
};

enum class DampingMatrix {
  kIdentity,   // D = I (Levenberg)
  kMarquardt,  // D = clamp(diag(A), marquardt_min, marquardt_max) (Marquardt; scale invariant)
};

// Precision of the linear system (A, g, δ, the solve) relative to the model's.
enum class SystemPrecision {
  // Chosen per problem and device for a float model (choose_system_precision; a float64 model is
  // unaffected): float64 under bayesian or ard regularization, whose evidence updates read A's
  // small eigenvalues (the diagonal of its inverse), which float32 rounding of A = Σ JᵀJ swamps
  // (measured on FANN's bank32nh: γ = 375–450 of 545 from a float32 A, 227–238 from a float64
  // one, and 1.2–1.7× the test error); float64 when A sums so many residual rows per step that
  // float32 rounding stops the fit (kMixedPrecisionRows) and the device computes float64 at no
  // less than kMinMixedFloat64Rate of its float32 rate; the model's precision otherwise.
  kAuto,
  kModel,    // the model's precision throughout
  kFloat64,  // float64 A, g and solve on float32 Jacobian rows: mixed precision (a float64 model
             // is unaffected).  A costs twice the memory and SYRK runs at the float64 rate, but
             // its rounding no longer caps how small λ may go before the factorization fails.
};

// auto picks a float64 system for a float model once A sums at least this many residual rows per
// step (batch × residuals per sample, over all ranks).  The rounding error of a float32 sum of m
// products is bounded by m·u relative to the sum of their magnitudes (u = 2⁻²⁴; Higham, Accuracy
// and Stability of Numerical Algorithms, §3.1), and a λ below the perturbation that rounding puts
// on A makes its Cholesky factorization fail: from 2¹⁴ rows that bound reaches 2⁻¹⁰ of A's
// diagonal.  Measured (2-core AMD EPYC, one thread;
// bench/results/2026-11-25-2core-amd-epyc-precision-auto.md): W1 (1 000 rows, 61 parameters)
// reaches a median MSE of 1.2e-7 in float32 and 8.7e-9 in mixed, but a mixed step costs 1.52×;
// W2 (10 000 rows, 769 parameters) ends 10 epochs at 1.0e-5 in float32 and 2.8e-6 in mixed at
// 1.9× the step time, and 20 float32 epochs, about the same time, reach 1.4e-6; W7 (100 000 rows)
// stops at 1.2e-6 in float32 and reaches 1.4e-8–5.0e-8 in mixed (seeds 0–4).
inline constexpr std::size_t kMixedPrecisionRows = std::size_t{1} << 14;
// ... on a device whose float64 rate is at least this fraction of its float32 rate (CPUs: ½,
// the SIMD lanes of a double are twice as wide; data-centre GPUs (P100, V100, A100, H100): ½;
// consumer GPUs: 1/32–1/64, where a float64 SYRK would run 16–32× slower than the step was
// planned for: auto keeps float32 there and says so).
inline constexpr double kMinMixedFloat64Rate = 0.25;

// A penalty ½ρ‖θ‖² added to the objective (weight decay), as MATLAB's trainbr does.
enum class Regularization {
  kNone,
  kL2,  // fixed ρ = weight_decay
  // Bayesian regularization (MacKay 1992; Foresee & Hagan 1997; MATLAB trainbr): after every
  // accepted step ρ = α/β is re-estimated from the effective number of parameters
  // γ = Σᵢ aᵢ/(aᵢ + ρ) (aᵢ the eigenvalues of JᵀJ) as ρ = γ·‖r‖² / ((N − γ)·‖θ‖²), N residuals.
  // Needs the primal A (cholesky or eigen); costs one eigenvalue computation per accepted step.
  // l2 works with every solver but dual (with cg, ρ shifts its operator).
  kBayesian,
  // Automatic relevance determination (MacKay 1994; Neal 1996): the same evidence update with one
  // ρ per parameter group — each input's weights in the first layer, each later layer's weights,
  // each layer's biases (ModelSpec::relevance_groups) — so that irrelevant inputs are switched
  // off by their own large ρ.  γ_g = n_g − ρ_g·Σ_{i∈g} [(A + R)⁻¹]_ii with R = diag(ρ_g(i)),
  // the group's own estimate γ_g·‖r‖² / ((N − γ)·‖θ_g‖²), γ = Σ γ_g, and ρ_g never below the
  // common level bayesian's update gives the whole network (ard_initial_scale below): one
  // Cholesky inverse (n³) per accepted step.  Needs the primal A (cholesky or eigen).
  kArd,
};

// bayesian and ard: ρ re-estimated from the evidence.
bool is_evidence_based(Regularization r);
// Why `r` cannot run with `solver` (the message names SolverOptions' fields and what to use), or
// nothing when it can.  The one place of the rule: the dual form's right-hand side must lie in
// J's row space, which g + Rθ does not; bayesian and ard need A itself (its eigenvalues, its
// inverse's diagonal), which matrix-free CG never forms.  kAuto always can: the solver selection
// then never picks an incompatible solver.
std::optional<std::string> regularization_conflict(Regularization r, LinearSolverType solver);

std::string_view to_string(LinearSolverType t);
std::string_view to_string(Regularization r);
std::optional<Regularization> parse_regularization(std::string_view s);
std::string_view to_string(DampingType t);
std::string_view to_string(DampingMatrix t);
std::optional<LinearSolverType> parse_linear_solver(std::string_view s);
std::optional<DampingType> parse_damping(std::string_view s);
std::optional<DampingMatrix> parse_damping_matrix(std::string_view s);
// "auto", "model" or "float64" (the Python options' names of SystemPrecision).
std::string_view to_string(SystemPrecision p);
std::optional<SystemPrecision> parse_system_precision(std::string_view s);

// The precision a user names — `lmtrain fit`'s `precision`, lmtrain.fit's and lmtrain.torch's
// `precision=` —, parsed once into the model's precision and the system's:
//   auto     a float32 model whose system the planner chooses (SystemPrecision::kAuto);
//   float32  float32 throughout, as asked;
//   mixed    a float32 model (and J) with a float64 system (A, g, the solve);
//   float64  float64 throughout.
// lmtrain.torch's model brings its own dtype: there "float64" on a float32 model is mixed, auto
// on a float64 model is float64, and the system is never less precise than the model.
enum class Precision { kAuto, kFloat32, kMixed, kFloat64 };
std::string_view to_string(Precision p);
std::optional<Precision> parse_precision(std::string_view s);
struct PrecisionChoice {
  bool float64_model = false;
  SystemPrecision system = SystemPrecision::kAuto;
};
// For a model the precision decides (lmtrain fit, lmtrain.fit).
PrecisionChoice resolve_precision(Precision p);
// For a model of its own dtype (lmtrain.torch): the system's precision, or InvalidArgument when
// the choice asks for less than the model holds (float32 on a float64 model) or for a float32
// model it is not (mixed on a float64 model).
SystemPrecision system_precision_for(Precision p, bool float64_model);

struct SolverOptions {
  LinearSolverType linear_solver = LinearSolverType::kAuto;
  DampingType damping = DampingType::kNielsen;
  DampingMatrix damping_matrix = DampingMatrix::kIdentity;

  // Initial λ and its clamp.  λ is kept in [lambda_min, lambda_max]; nielsen: a rejection with λ
  // already at lambda_max ends training (MATLAB trainlm's mu_max criterion); multiplicative: a
  // rejection that raises λ to lambda_max does (cuPyLMA's and torch-levenberg-marquardt's test).
  double lambda_initial = 1e-3;
  double lambda_min = 1e-10;
  double lambda_max = 1e10;
  // Multiplicative damping factors (increase > 1 > decrease > 0).
  double lambda_increase = 10.0;
  double lambda_decrease = 0.1;
  // λ per sample: the system solved is (JᵀJ/B + λD)δ = Jᵀr/B, i.e. (JᵀJ + λ·B·D)δ = Jᵀr, with B
  // the samples (units) of the step's batch over all ranks — the normalization of cuPyLMA
  // (cupylma/lma.py, "Normalization") and torch-levenberg-marquardt (training.py), whose
  // λ₀ = 1e-3 therefore damps B times more than lmtrain's λ₀ on JᵀJ (on W7, B = 100 000).  λ,
  // its bounds, the reports and the checkpoints stay per sample; the gain ratio, the floor of
  // invalid attempts and every solver see λ·B.
  bool damping_per_sample = false;
  // After a step ends at lambda_max (termination lambda_above_max), the next step starts again
  // from lambda_initial: cuPyLMA's rule (and torch-levenberg-marquardt's auto_reset).  It matters
  // to a caller that steps on after that termination (lmtrain.torch.LMA returns it as cuPyLMA's
  // `terminated` flag and the script's loop goes on); `lmtrain fit` ends training there.
  bool restart_lambda_at_max = false;

  // Bounds of the Marquardt diagonal: D_ii = clamp(A_ii, marquardt_min, marquardt_max).
  double marquardt_min = 1e-6;
  double marquardt_max = 1e32;

  // θ ← θ − learning_rate·δ.  1 is the classic LM step.
  double learning_rate = 1.0;
  // Solves per LM step (λ retries, invalid steps included) before the step is given up and
  // training moves on to the next batch with the raised λ.
  int max_attempts = 10;

  // Geodesic acceleration (Transtrum, Machta & Sethna, Phys. Rev. E 83, 036701 (2011);
  // Transtrum & Sethna, arXiv:1207.4999): the LM step v = −lr·δ is the first-order term of a
  // path on the model manifold; the second-order term a solves (A + λD)a = −Jᵀr_vv with the
  // factorization the attempt already has, r_vv the residuals' second derivative along v by
  // central differences, r_vv ≈ (r(θ + hv) − 2r(θ) + r(θ − hv))/h², and the trial is
  // θ + v + ½a.  The correction is kept only when 2‖a‖ ≤ geodesic_ratio·‖v‖ (otherwise the
  // attempt goes on with v alone).  Costs two forward passes, one product with Jᵀ and one
  // solve per attempt.  Measured: on W7 (full batch) it takes MSE from a 4.6e-4 plateau to
  // 1.4e-7 in 200 epochs; on W2 (20 epochs) from 2.4e-5 to 2.6e-6 (bench/README.md).  Used with
  // the direct solvers (cholesky, eigen) only: not with the dual form, and not with cg, whose
  // inexact solves (residual cg_forcing·‖rhs‖) make the correction wrong — measured on a 1-400-1
  // network, 8 steps: loss 0.091 with the correction against 0.052 without at cg_forcing = 0.1,
  // while at 1e-6 (as with cholesky) 0.0040 against 0.0116.
  // Unset (auto, the default): on, except with the softmax classification losses
  // (cross_entropy, cross_entropy_sqrt, cross_entropy_sampled), where it costs a quarter of the
  // step and buys no median accuracy — measured on W4 (Fashion-MNIST CNN, 15 steps, seeds 1–5):
  // test accuracy 60.9 % with it and 61.1 % without for cross_entropy_sqrt (median step 72 → 54
  // ms), 76.3 % and 76.6 % for cross_entropy.  cross_entropy_sampled's residuals are those of one
  // drawn class, whose second derivative along δ says little about the GGN model.
  // geodesic_acceleration_for resolves it; true or false is kept as given.
  std::optional<bool> geodesic_acceleration;
  double geodesic_ratio = 0.75;
  double geodesic_step = 0.1;
  // After a correction the ratio test refuses, the next 1, 2, 4 … attempts of a run of refusals
  // (at most this many) skip it and take the plain step (GeodesicBackoff); 0 computes it on every
  // attempt.  −1 (auto): 2 for a float32 model (float32 or mixed precision), whose refusals are
  // mostly rounding noise in r_vv, and 0 for a float64 model, whose few refusals are not.
  // Measured on W1, 30 seeds per precision, 2 against 0 (docs/design.md, bench/README.md):
  // median MSE float32 2.4e-7 → 1.1e-7 and mixed 1.6e-8 → 1.1e-8 with the float32 geodesic phase
  // 163 → 101 µs per step; float64 4.2e-11 → 2.7e-11 but 90th percentile 4.4e-10 → 6.3e-10, and
  // the torch path's float64 W1 worse on three seeds of three.
  int geodesic_backoff_max = -1;

  // A float32 A formed on TF32 tensor cores (CUDA, opt-in): the products of J's columns take
  // J rounded to TF32's 10-bit mantissa and add in float32, so A's entries carry a relative
  // error of about 2⁻¹¹ · √rows where float32 carries 2⁻²⁴ · √rows — a rounding that λ·D must
  // exceed for the step to stay a descent direction.  Where the system is float64 (mixed,
  // float64) or the device has no TF32 (the CPU), it is ignored and the Summary's normal-matrix
  // line says so.  Off by default: lmtrain's float32 results match the CPU's at float rounding.
  bool tf32 = false;
  // Each attempt's factorization and solve — A + λD copied, factored, the two triangular solves —
  // launched as one CUDA graph, recorded at the first attempt and replayed with λ read from the
  // device (issue 36: at W2's n = 769 the factorization is a chain of small launches); on one
  // device and rank, without a penalty, the trial's forward pass and (float32 or float64, not
  // mixed) the geodesic correction as well, replayed while their buffers stay
  // (solve/recorded_work.h).  The
  // bits are the eager step's.  The cholesky solver on a CUDA device only; elsewhere, or where
  // the device refuses to record the work, it is ignored and the Summary's normal-matrix line
  // says so.  Off by default: not yet run on a GPU.
  bool cuda_graphs = false;
  // How A = JᵀJ is formed: auto (CUDA measures SYRK against split-K per shape; the CPU runs
  // OpenBLAS's SYRK), syrk, or split_k (normal_matrix_method.h).  syrk and split_k make a GPU run
  // form A the same way every time.
  NormalMatrixMethod normal_matrix = NormalMatrixMethod::kAuto;

  // Convergence tolerances on the current batch (0 disables; the peers train for a fixed number
  // of epochs, so they are off by default).  With F the objective and θ the parameters:
  //   gradient:  ‖Jᵀr‖∞ ≤ gradient_tolerance
  //   function:  |F_old − F_new| ≤ function_tolerance · F_old   (after an accepted step)
  //   parameter: ‖Δθ‖₂ ≤ parameter_tolerance · (‖θ‖₂ + parameter_tolerance)   (Ceres' definition)
  double gradient_tolerance = 0.0;
  double function_tolerance = 0.0;
  double parameter_tolerance = 0.0;

  SystemPrecision system_precision = SystemPrecision::kAuto;

  // Objective F + ½ρ‖θ‖²: ρ = weight_decay for l2; its initial value for bayesian and ard (ard's
  // common level and every group's own estimate).  0: bayesian, and ard's common level, start
  // from the evidence estimate with γ = min(n, N)/2 at the first linearization point (with ρ = 0,
  // γ would be rank(A) — N itself when N < n — and no update could leave 0); ard's own estimates
  // from ard_initial_scale × the mean of diag(JᵀJ) there.
  Regularization regularization = Regularization::kNone;
  double weight_decay = 0.0;
  // ard's schedule (issues 28 and 38).  Each group's ρ_g = max(ρ̄, ρ'_g):
  //   ρ̄    the common level: bayesian's re-estimate of one ρ for the whole network, γσ²/‖θ‖²
  //        with γ = Σ γ_g and σ² = ‖r‖²/(N − γ), started and updated (undamped) as bayesian's;
  //   ρ'_g the group's own re-estimate γ_gσ²/‖θ_g‖², started at ard_initial_scale × the mean of
  //        diag(JᵀJ) at the first linearization point, moved by at most ard_max_factor per update
  //        (a damped step of log ρ'_g), and lifted to ρ̄ by a step taken where the model is linear
  //        (a linear least-squares problem, a converged network: penalty.cpp).
  // The common level regularizes from the first step.  Issue 28's schedule (every ρ_g from 1e-4 ×
  // mean diag, ×10 per update) left the first steps almost unregularized, and on noisy data they
  // fitted the noise before the evidence acted: through `lmtrain fit` with validation early
  // stopping (examples/fann-kin32fm's 15 %, 6 epochs), bank32nh's best epoch came before it and
  // ARD ended at plain LM's test MSE (1.556e-2 for both, seeds 1–3; issue 38); run on, its output
  // layer's ρ drifted towards 0 while the inputs' grew, and it overfitted (1.8e-2 at 100 epochs).
  // The floor holds that drift too.  The own estimates start far below it because a group's own
  // evidence is wrong until the network has learned what the common prior lets it learn, which
  // under that prior takes about ten steps (pumadyn-32fm's nonlinear inputs: 9–10): pushed above
  // ρ̄ sooner, a group the network has not used yet is switched off and does not come back.  With
  // a start of 1e-6 pumadyn-32fm fell into the linear fit (test MSE 4.0e-3, seeds 1–3 under early
  // stopping), with 1e-8 and 1e-10 Friedman #1 lost x₂ on one seed of ten (test MSE 3.46 against
  // 1.1); from 1e-12 the first own estimate passes ρ̄ at the 10th–12th update (the six W6 sets,
  // seeds 1–3).  1e-14 ranked Friedman #1's five relevant inputs first on 9 of 10 seeds after
  // LMRegressor's 100 epochs, 1e-12 on 10 of 10.  Known cost: under early stopping Friedman #1's
  // seed 5 of 10 still loses x₂ (test MSE 3.50), which issue 28's schedule did not.
  // Measured (bench/results/2026-11-26-2core-amd-epyc-regression-suite.md): through
  // `lmtrain fit` with that early stopping, 32-16-1, seeds 1–3, median test MSE bank32nh 1.438e-2
  // (RPROP 1.550e-2 on raw inputs, 2.923e-2 on standardized ones; plain LM 1.556e-2),
  // pumadyn-32fm 2.18e-3 (issue 28's schedule 3.56e-3, RPROP 4.65e-3, plain LM 6.20e-3), kin32fm
  // 2.06e-3, thyroid 9.19e-3: ahead of RPROP and plain LM on every W6 set but census-house, 0.2 %
  // behind plain LM there (issue 28's schedule 0.7 %).  bayesian keeps its start and updates.
  double ard_initial_scale = 1e-12;
  double ard_max_factor = 10.0;

  // Memory planner: bytes the LM step may use on its device.  0 means memory_fraction of the
  // memory available when training starts.
  std::size_t memory_budget_bytes = 0;
  double memory_fraction = 0.5;
  // Optional cap on the samples per Jacobian slice (0: as many as the budget allows).
  std::size_t max_slice_samples = 0;

  // Conjugate gradients (linear_solver = cg): relative residual target η (0 < η < 1) and the
  // iteration cap (0: n, the exact-arithmetic bound).
  double cg_forcing = 0.1;
  std::size_t cg_max_iterations = 0;

  // distributed_cholesky: the side of the square blocks A is dealt over the process grid in
  // (0: auto, dist::BlockCyclicLayout::block_size). ScaLAPACK's factorization runs its BLAS-3
  // updates on blocks of this size. Auto is 256 by measurement: pdpotrf at n = 8 000 on a quiet
  // 2-core EPYC took 4.09 / 3.25 / 2.96 s on 2 ranks with 64 / 128 / 256 blocks, 2.71 / 2.74 s on
  // 4 ranks with 128 / 256 (bench/results/2026-11-25-2core-amd-epyc-distributed-potrf.md);
  // smaller where n leaves a process row or column fewer than 8 such blocks.
  std::size_t distributed_block_size = 0;

  // True if every field is in range; otherwise false with `error` naming the field, its value and
  // the violated constraint.
  bool is_valid(std::string* error) const;
  // Throws InvalidArgument with is_valid's message.
  void validate() const;
};

// SolverOptions::geodesic_acceleration with auto resolved for `loss` (see the field).
bool geodesic_acceleration_for(const SolverOptions& options, LossKind loss);
// Whether the step applies geodesic acceleration with this (resolved) solver: when asked for and
// the solver is direct (cholesky, eigen, distributed_cholesky).  Auto counts as asked for here: the
// Trainer and the Python steps resolve it for their loss first (geodesic_acceleration_for); a
// caller that gives the step its own residuals (least squares) gets the correction.
bool uses_geodesic_acceleration(const SolverOptions& options, LinearSolverType solver);
// SolverOptions::geodesic_backoff_max with auto (−1) resolved for a model of this precision.
int geodesic_backoff_max(const SolverOptions& options, bool float32_model);

// kAuto resolved for a model in float (float_model) or double: kModel or kFloat64, from the
// regularization alone (a caller that knows the problem uses choose_system_precision, and passes
// its choice on in SolverOptions::system_precision).
SystemPrecision resolve_system_precision(const SolverOptions& options, bool float_model);

// What choose_system_precision decides on.
struct SystemPrecisionProblem {
  bool float_model = true;
  std::size_t rows = 0;       // residual rows summed into one A: batch × residuals, all ranks
  double float64_rate = 0.5;  // the device's float64 throughput over its float32 throughput
};
// SolverOptions::system_precision with kAuto resolved for `problem`, and why (for the Summary).
struct SystemPrecisionChoice {
  SystemPrecision precision = SystemPrecision::kModel;
  bool automatic = false;  // chosen by kAuto (the reason says why)
  std::string reason;
};
SystemPrecisionChoice choose_system_precision(const SolverOptions& options,
                                              const SystemPrecisionProblem& problem);

}  // namespace lmtrain
