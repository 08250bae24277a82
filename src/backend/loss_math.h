// Per-sample loss kernels shared by the CPU and CUDA backends.  The formulas and their
// justification are in include/lmtrain/core/loss_kind.h.  Internally everything is evaluated
// in double (a sample has at most a few thousand outputs) and cast on store.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "activation_math.h"
#include "lmtrain/core/loss_kind.h"

namespace lmtrain::kernels {

LMTRAIN_HD double guarded_sqrt(double x) {
  return sqrt(x > kSqrtGuard ? x : kSqrtGuard);
}

// Cross-entropy of one sample with logits z and target probabilities y; writes p = softmax(z)
// when p != nullptr.  log-sum-exp is shifted by max(z).
template <typename T>
LMTRAIN_HD double cross_entropy_sample(std::size_t c, const T* z, const T* y, double* p) {
  double zmax = static_cast<double>(z[0]);
  for (std::size_t k = 1; k < c; ++k) zmax = fmax(zmax, static_cast<double>(z[k]));
  double sum = 0.0;
  for (std::size_t k = 0; k < c; ++k) sum += exp(static_cast<double>(z[k]) - zmax);
  const double log_sum = log(sum);
  double ce = 0.0;
  for (std::size_t k = 0; k < c; ++k) {
    const double log_p = static_cast<double>(z[k]) - zmax - log_sum;
    ce -= static_cast<double>(y[k]) * log_p;
    if (p != nullptr) p[k] = exp(log_p);
  }
  return ce;
}

// Elementwise losses: value ℓ(z, y) and derivative ℓ'(z).
LMTRAIN_HD double elementwise_loss(LossKind kind, double delta, double z, double y, double* dl) {
  const double e = z - y;
  switch (kind) {
    case LossKind::kBce: {
      // softplus(z) − yz = (1 − y)·softplus(z) + y·softplus(−z) and σ(z) − y = (1 − y)·σ(z) −
      // y·σ(−z) (softplus(z) − z = softplus(−z), σ(z) − 1 = −σ(−z)).  The right-hand forms do not
      // cancel at a confident right logit: at z = 40, y = 1, ℓ = log1p(e⁻⁴⁰) ≈ 4e-18 where the
      // left-hand ones give 0, and so r and ∂r/∂z of core/loss_kind.h.
      *dl = (1.0 - y) * sigmoid(z) - y * sigmoid(-z);
      return (1.0 - y) * softplus(z) + y * softplus(-z);
    }
    case LossKind::kHuber: {
      const double ae = fabs(e);
      if (ae <= delta) {
        *dl = e;
        return 0.5 * e * e;
      }
      *dl = e > 0 ? delta : -delta;
      return delta * (ae - 0.5 * delta);
    }
    case LossKind::kL1: {
      *dl = e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0);
      return fabs(e);
    }
    default: {
      *dl = e;
      return 0.5 * e * e;
    }
  }
}

// ---- sample weights (core/loss_kind.h) ------------------------------------------------------
// Sample b's target row starts at y + b·target_stride; its weight follows its C targets.
template <typename T>
LMTRAIN_HD std::size_t target_stride(const LossParams<T>& loss, std::size_t c) {
  return loss.sample_weighted ? c + 1 : c;
}
template <typename T>
LMTRAIN_HD double sample_weight(const LossParams<T>& loss, std::size_t c, const T* y) {
  return loss.sample_weighted ? static_cast<double>(y[c]) : 1.0;
}
// A weighted sample's residuals and seeds are √w times the unweighted ones, as stored in T: the
// CPU and CUDA backends both scale the stored value, so their bits agree.
template <typename T>
LMTRAIN_HD T weighted_entry(double root_weight, T value) {
  return static_cast<T>(root_weight * static_cast<double>(value));
}

// Objective contribution of one sample, unweighted.
template <typename T>
LMTRAIN_HD double unweighted_sample_objective(const LossParams<T>& loss, std::size_t c, const T* z,
                                              const T* y) {
  switch (loss.kind) {
    case LossKind::kMse: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k) {
        const double e = static_cast<double>(z[k]) - static_cast<double>(y[k]);
        const double w = loss.weights ? static_cast<double>(loss.weights[k]) : 1.0;
        f += 0.5 * w * e * e;
      }
      return f;
    }
    case LossKind::kCrossEntropy:
    case LossKind::kCrossEntropySampled:
      return cross_entropy_sample(c, z, y, nullptr);
    case LossKind::kCrossEntropySqrt:
      return 0.5 * cross_entropy_sample(c, z, y, nullptr);
    default: {
      double f = 0.0, dl = 0.0;
      for (std::size_t k = 0; k < c; ++k)
        f += elementwise_loss(loss.kind, loss.huber_delta, static_cast<double>(z[k]),
                              static_cast<double>(y[k]), &dl);
      return f;
    }
  }
}

// Objective contribution of one sample: w·F_b.
template <typename T>
LMTRAIN_HD double sample_objective(const LossParams<T>& loss, std::size_t c, const T* z,
                                   const T* y) {
  const double f = unweighted_sample_objective(loss, c, z, y);
  return loss.sample_weighted ? sample_weight(loss, c, y) * f : f;
}

// ---- one residual or seed entry at a time --------------------------------------------------
// sample_linearize below is written in terms of these, and the CUDA backend computes each entry
// in its own thread with them, so both backends run the same arithmetic.

// √w_k of weighted mse (1 without weights): its residual is √w_k·e_k and its seed √w_k.
template <typename T>
LMTRAIN_HD double mse_root_weight(const LossParams<T>& loss, std::size_t k) {
  return loss.weights ? sqrt(static_cast<double>(loss.weights[k])) : 1.0;
}

// Exact cross-entropy, row k of the GGN factor L = diag(s)(I − 1pᵀ) with s_k = √p_k (p guarded):
// residual (p_k − y_k)/s_k, seed entries s_k(δ_kj − p_j).
LMTRAIN_HD double cross_entropy_scale(double pk) {
  return sqrt(pk > kProbabilityGuard ? pk : kProbabilityGuard);
}
LMTRAIN_HD double cross_entropy_residual(double pk, double yk) {
  return (pk - yk) / cross_entropy_scale(pk);
}
LMTRAIN_HD double cross_entropy_seed(double sk, double pk, double pj, bool diagonal) {
  return diagonal ? sk * (1.0 - pk) : -sk * pj;
}

// √CE: one residual √CE per sample, seed (p_j − y_j) / (2√CE) (√ guarded at zero).
LMTRAIN_HD double cross_entropy_sqrt_residual(double ce) {
  return sqrt(ce > 0 ? ce : 0.0);
}
LMTRAIN_HD double cross_entropy_sqrt_seed(double ce, double pj, double yj) {
  return (pj - yj) / (2.0 * guarded_sqrt(ce));
}

// cross_entropy_sampled: class k drawn from q = (p + y)/2 with a uniform u ∈ [0, 1) that is a
// hash (SplitMix64's finalizer) of the linearization's key and the sample's index; the row is
// w(e_k − p) with w = √(p_k/q_k) and the residual (p_k − y_k)/√(p_k q_k).
struct SampledClass {
  std::size_t k;
  double weight;    // √(p_k/q_k)
  double residual;  // (p_k − y_k)/√(p_k q_k)
};
LMTRAIN_HD double draw_uniform(std::uint64_t key, std::size_t index) {
  std::uint64_t h = key * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(index);
  h += 0x9E3779B97F4A7C15ULL;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}
LMTRAIN_HD SampledClass sampled_class_at(std::size_t k, double pk, double yk) {
  const double q = 0.5 * (pk + yk);
  const double pq = pk * q;
  return {k, q > 0 ? sqrt(pk / q) : 0.0,
          (pk - yk) / sqrt(pq > kProbabilityGuard ? pq : kProbabilityGuard)};
}
// The class that u selects from q (the last one when rounding leaves u·Σq beyond the sum).
template <typename T>
LMTRAIN_HD std::size_t sample_class_index(std::size_t c, const double* p, const T* y, double u) {
  double total = 0.0;  // Σq, 1 up to rounding (and for targets that are probability vectors)
  for (std::size_t k = 0; k < c; ++k) total += 0.5 * (p[k] + static_cast<double>(y[k]));
  const double target = u * total;
  std::size_t k = 0;
  double below = 0.0;
  for (; k + 1 < c; ++k) {
    below += 0.5 * (p[k] + static_cast<double>(y[k]));
    if (target < below) break;
  }
  return k;
}
LMTRAIN_HD double cross_entropy_sampled_seed(const SampledClass& s, double pj, bool drawn) {
  return s.weight * ((drawn ? 1.0 : 0.0) - pj);
}

// The elementwise losses (bce, huber, l1): r = sign(e)√(2ℓ) for the symmetric ones, √(2ℓ) for
// bce; ∂r/∂z = ℓ'/r, except r = e exactly in Huber's quadratic zone.
struct ElementwiseLinearization {
  double loss;        // ℓ
  double residual;    // r
  double derivative;  // ∂r/∂z, the seed
};
LMTRAIN_HD ElementwiseLinearization elementwise_linearize(LossKind kind, double delta, double zk,
                                                          double yk) {
  double dl = 0.0;
  const double l = elementwise_loss(kind, delta, zk, yk, &dl);
  double sign = 1.0;
  if (kind != LossKind::kBce) sign = zk >= yk ? 1.0 : -1.0;
  const double root = sqrt(2.0 * (l > 0 ? l : 0.0));
  double dr = 0.0;
  if (kind == LossKind::kHuber && fabs(zk - yk) <= delta) {
    dr = 1.0;  // r = e exactly in the quadratic zone
  } else {
    dr = dl / (sign * guarded_sqrt(2.0 * l));
  }
  return {l, sign * root, dr};
}

// The objective of one sample as unweighted_sample_linearize returns it, without residuals or
// seeds (a weighted sample's caller multiplies by w); the softmax p goes to `p` (C doubles) for
// the cross-entropy kinds.
template <typename T>
LMTRAIN_HD double sample_linearization_objective(const LossParams<T>& loss, std::size_t c,
                                                 const T* z, const T* y, double* p) {
  switch (loss.kind) {
    case LossKind::kMse: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k) {
        const double e = static_cast<double>(z[k]) - static_cast<double>(y[k]);
        const double sw = mse_root_weight(loss, k);
        f += 0.5 * sw * sw * e * e;
      }
      return f;
    }
    case LossKind::kCrossEntropy:
    case LossKind::kCrossEntropySampled:
      return cross_entropy_sample(c, z, y, p);
    case LossKind::kCrossEntropySqrt:
      return 0.5 * cross_entropy_sample(c, z, y, p);
    default: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k)
        f += elementwise_linearize(loss.kind, loss.huber_delta, static_cast<double>(z[k]),
                                   static_cast<double>(y[k]))
                 .loss;
      return f;
    }
  }
}

// Residuals (R per sample) and seed rows (R × C) of sample `index` of the batch, unweighted;
// returns its objective.  `scratch` holds at least C doubles.
template <typename T>
LMTRAIN_HD double unweighted_sample_linearize(const LossParams<T>& loss, std::size_t c, const T* z,
                                              const T* y, std::size_t index, T* r, T* seeds,
                                              double* scratch) {
  switch (loss.kind) {
    case LossKind::kMse: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k) {
        const double e = static_cast<double>(z[k]) - static_cast<double>(y[k]);
        const double sw = mse_root_weight(loss, k);
        r[k] = static_cast<T>(sw * e);
        f += 0.5 * sw * sw * e * e;
        for (std::size_t j = 0; j < c; ++j) seeds[k * c + j] = T(0);
        seeds[k * c + k] = static_cast<T>(sw);
      }
      return f;
    }
    case LossKind::kCrossEntropy: {
      double* p = scratch;
      const double ce = cross_entropy_sample(c, z, y, p);
      for (std::size_t k = 0; k < c; ++k) {
        const double s = cross_entropy_scale(p[k]);
        r[k] = static_cast<T>(cross_entropy_residual(p[k], static_cast<double>(y[k])));
        for (std::size_t j = 0; j < c; ++j)
          seeds[k * c + j] = static_cast<T>(cross_entropy_seed(s, p[k], p[j], j == k));
      }
      return ce;
    }
    case LossKind::kCrossEntropySqrt: {
      double* p = scratch;
      const double ce = cross_entropy_sample(c, z, y, p);
      r[0] = static_cast<T>(cross_entropy_sqrt_residual(ce));
      for (std::size_t j = 0; j < c; ++j)
        seeds[j] = static_cast<T>(cross_entropy_sqrt_seed(ce, p[j], static_cast<double>(y[j])));
      return 0.5 * ce;
    }
    case LossKind::kCrossEntropySampled: {
      double* p = scratch;
      const double ce = cross_entropy_sample(c, z, y, p);
      const std::size_t k = sample_class_index(c, p, y, draw_uniform(loss.draw_key, index));
      const SampledClass s = sampled_class_at(k, p[k], static_cast<double>(y[k]));
      r[0] = static_cast<T>(s.residual);
      for (std::size_t j = 0; j < c; ++j)
        seeds[j] = static_cast<T>(cross_entropy_sampled_seed(s, p[j], j == s.k));
      return ce;
    }
    default: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k) {
        const ElementwiseLinearization lin = elementwise_linearize(
            loss.kind, loss.huber_delta, static_cast<double>(z[k]), static_cast<double>(y[k]));
        f += lin.loss;
        r[k] = static_cast<T>(lin.residual);
        for (std::size_t j = 0; j < c; ++j) seeds[k * c + j] = T(0);
        seeds[k * c + k] = static_cast<T>(lin.derivative);
      }
      return f;
    }
  }
}

// The same for a weighted sample: residuals and seeds √w times, objective w·F_b.
template <typename T>
LMTRAIN_HD double sample_linearize(const LossParams<T>& loss, std::size_t c, const T* z, const T* y,
                                   std::size_t index, T* r, T* seeds, double* scratch) {
  const double f = unweighted_sample_linearize(loss, c, z, y, index, r, seeds, scratch);
  if (!loss.sample_weighted) return f;
  const double w = sample_weight(loss, c, y), root = sqrt(w);
  const bool one_row =
      loss.kind == LossKind::kCrossEntropySqrt || loss.kind == LossKind::kCrossEntropySampled;
  const std::size_t rows = one_row ? 1 : c;
  for (std::size_t k = 0; k < rows; ++k) r[k] = weighted_entry(root, r[k]);
  for (std::size_t e = 0; e < rows * c; ++e) seeds[e] = weighted_entry(root, seeds[e]);
  return w * f;
}

}  // namespace lmtrain::kernels
