// Loss functions as residuals.  Each loss defines
//   * its residual rows per sample R and the residual vector r (what LM squares),
//   * the objective F whose gradient is Jᵀr and whose (generalized) Gauss–Newton Hessian is JᵀJ,
//   * the reported loss, which matches PyTorch's definition (reduction = "mean").
// Per sample b with network output z ∈ R^C and target y ∈ R^C (e = z − y):
//
//  mse                 r_c = √w_c e_c                      R = C, F = ½Σr²
//                      reported = (1/BC) Σ w_c e_c²        (nn.MSELoss when w ≡ 1)
//  cross_entropy       p = softmax(z), y a probability vector (one-hot for class labels).
//                      Exact generalized Gauss–Newton: with s = √p, L = diag(s)(I − 1pᵀ) satisfies
//                      LᵀL = diag(p) − ppᵀ (the softmax Hessian of CE), and r_c = (p_c − y_c)/s_c
//                      satisfies Lᵀr = p − y = ∇_z CE.  The Jacobian rows are L·∂z/∂θ, so JᵀJ is
//                      the true GGN and Jᵀr the true gradient.      R = C, F = Σ_b CE_b
//                      reported = (1/B) Σ_b −Σ_c y_c log p_c   (nn.CrossEntropyLoss)
//  cross_entropy_sqrt  r = √CE_b (what cuPyLMA and torch-levenberg-marquardt do)
//                      R = 1, F = ½Σr², reported = (1/B) Σ CE_b
//  cross_entropy_sampled
//                      cross_entropy's GGN and gradient estimated without bias from one sampled
//                      row per sample: the cost of cross_entropy_sqrt, the model of
//                      cross_entropy.  Class k is drawn from q = (p + y)/2 and, with
//                      w = √(p_k/q_k), the row is w(e_k − p)ᵀ·∂z/∂θ and r = (p_k − y_k)/√(p_k q_k).
//                      Then E_q[ssᵀ] = Σ_k p_k(e_k − p)(e_k − p)ᵀ = diag(p) − ppᵀ and
//                      E_q[s r] = Σ_k (e_k − p)(p_k − y_k) = p − y (Σy = 1): JᵀJ and Jᵀr are
//                      unbiased for the GGN and the gradient.  Drawing from p alone (the Monte
//                      Carlo Fisher) gives a gradient term (y_k/p_k)(e_k − p) whose variance grows
//                      as 1/p of the true class; the mixture keeps every term below 2|e_k − p|.
//                      The draw is a hash of LossParams::draw_key and the sample's index in the
//                      batch; the Trainer keys each step by its rank and step count, so a run,
//                      and a resumed run, repeat exactly.  Measured on W4 (bench/README.md):
//                      median test accuracy 73.6 % over 20 seeds at the step time of
//                      cross_entropy_sqrt (61.2 %); cross_entropy 76.7 % at 5.5× the step time.
//                                       R = 1, F = Σ_b CE_b, reported = (1/B) Σ_b CE_b
//  bce                 on logits (nn.BCEWithLogitsLoss): ℓ = softplus(z) − y z, y ∈ [0, 1]
//                      r_c = √(2ℓ_c), R = C, F = Σℓ, reported = (1/BC) Σ ℓ
//  huber               ℓ = ½e² for |e| ≤ δ, δ(|e| − ½δ) otherwise (nn.HuberLoss, δ = 1)
//                      r_c = sign(e)√(2ℓ) (= e in the quadratic zone), R = C, F = Σℓ,
//                      reported = (1/BC) Σ ℓ
//  l1                  ℓ = |e|, r_c = sign(e)√(2|e|), R = C, F = Σℓ, reported = (1/BC) Σ ℓ
//
// Sample weights (frequency weights, as scikit-learn's sample_weight): a sample of weight w counts
// as w copies of itself.  Its objective is w·F_b, its residuals and seed rows are √w times the
// above, so JᵀJ and Jᵀr are the weighted sums; the reported loss divides by the batch's total
// weight instead of its count (a weighted mean).  Integer weights train as repeated rows.
//
// Every square root is guarded: ∂r/∂z = ℓ'/r is evaluated with r ≥ √kSqrtGuard so a residual at
// (or near) zero gives a large but finite Jacobian row instead of a NaN.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace lmtrain {

enum class LossKind {
  kMse,
  kCrossEntropy,
  kCrossEntropySqrt,
  kBce,
  kHuber,
  kL1,
  kCrossEntropySampled
};

inline constexpr std::array<std::pair<LossKind, std::string_view>, 7> kLossNames = {{
    {LossKind::kMse, "mse"},
    {LossKind::kCrossEntropy, "cross_entropy"},
    {LossKind::kCrossEntropySqrt, "cross_entropy_sqrt"},
    {LossKind::kBce, "bce"},
    {LossKind::kHuber, "huber"},
    {LossKind::kL1, "l1"},
    {LossKind::kCrossEntropySampled, "cross_entropy_sampled"},
}};

// The softmax classification losses: C ≥ 2 logits, targets are probability vectors.
constexpr bool is_softmax_loss(LossKind k) {
  return k == LossKind::kCrossEntropy || k == LossKind::kCrossEntropySqrt ||
         k == LossKind::kCrossEntropySampled;
}

constexpr std::string_view to_string(LossKind k) {
  for (const auto& [kind, name] : kLossNames)
    if (kind == k) return name;
  return "unknown";
}

inline std::optional<LossKind> parse_loss(std::string_view name) {
  for (const auto& [kind, n] : kLossNames)
    if (n == name) return kind;
  return std::nullopt;
}

// Floor under the quantity inside a residual's square root when it is used as a divisor.
inline constexpr double kSqrtGuard = 1e-30;
// Floor under softmax probabilities used as divisors in the exact cross-entropy residual.
inline constexpr double kProbabilityGuard = 1e-30;

// What a backend kernel needs to evaluate a loss.  `weights` is a device pointer to C per-output
// weights (mse only) or null for all ones.  With `sample_weighted` a sample's target row holds its
// C targets and then its weight (C + 1 values: target_columns); without, the C targets.
template <typename T>
struct LossParams {
  LossKind kind = LossKind::kMse;
  double huber_delta = 1.0;
  const T* weights = nullptr;
  bool sample_weighted = false;
  // cross_entropy_sampled: the key of this linearization's draws (Loss<T> counts them).
  std::uint64_t draw_key = 0;
};

// The loss users read (PyTorch's mean reduction) from the objective F of samples of total weight
// `weight` (their count when unweighted) with `outputs` outputs each (the formulas above, with B
// the weight).
constexpr double reported_loss_of_weight(LossKind kind, double objective, double weight,
                                         std::size_t outputs) {
  const double b = weight, c = static_cast<double>(outputs);
  switch (kind) {
    case LossKind::kMse:
      return 2.0 * objective / (b * c);
    case LossKind::kCrossEntropy:
    case LossKind::kCrossEntropySampled:
      return objective / b;
    case LossKind::kCrossEntropySqrt:
      return 2.0 * objective / b;
    case LossKind::kBce:
    case LossKind::kHuber:
    case LossKind::kL1:
      return objective / (b * c);
  }
  return objective;
}

// The same over `batch` unweighted samples.  A residual function's F = ½‖r‖² reads as mse with one
// output per residual: the mean of r².
constexpr double reported_loss(LossKind kind, double objective, std::size_t batch,
                               std::size_t outputs) {
  return reported_loss_of_weight(kind, objective, static_cast<double>(batch), outputs);
}

// Columns of a sample's target row: its outputs, and its weight when the loss is sample-weighted.
constexpr std::size_t target_columns(std::size_t outputs, bool sample_weighted) {
  return outputs + (sample_weighted ? 1 : 0);
}

constexpr std::size_t residuals_per_sample(LossKind kind, std::size_t outputs) {
  return kind == LossKind::kCrossEntropySqrt || kind == LossKind::kCrossEntropySampled ? 1
                                                                                       : outputs;
}

}  // namespace lmtrain
