// Per-sample loss kernels shared by the CPU and CUDA backends.  The formulas and their
// justification are in include/lmtrain/core/loss_kind.h.  Internally everything is evaluated
// in double (a sample has at most a few thousand outputs) and cast on store.
#pragma once

#include <cmath>
#include <cstddef>

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

// Objective contribution of one sample.
template <typename T>
LMTRAIN_HD double sample_objective(const LossParams<T>& loss, std::size_t c, const T* z,
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

// Residuals (R per sample) and seed rows (R × C) of one sample; returns its objective.
// `scratch` holds at least C doubles.
template <typename T>
LMTRAIN_HD double sample_linearize(const LossParams<T>& loss, std::size_t c, const T* z, const T* y,
                                   T* r, T* seeds, double* scratch) {
  switch (loss.kind) {
    case LossKind::kMse: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k) {
        const double e = static_cast<double>(z[k]) - static_cast<double>(y[k]);
        const double sw = loss.weights ? sqrt(static_cast<double>(loss.weights[k])) : 1.0;
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
        const double pk = p[k] > kProbabilityGuard ? p[k] : kProbabilityGuard;
        const double s = sqrt(pk);
        r[k] = static_cast<T>((p[k] - static_cast<double>(y[k])) / s);
        // Row k of L = diag(s)(I − 1pᵀ): s_k (e_k − p).
        for (std::size_t j = 0; j < c; ++j) seeds[k * c + j] = static_cast<T>(-s * p[j]);
        seeds[k * c + k] = static_cast<T>(s * (1.0 - p[k]));
      }
      return ce;
    }
    case LossKind::kCrossEntropySqrt: {
      double* p = scratch;
      const double ce = cross_entropy_sample(c, z, y, p);
      const double root = guarded_sqrt(ce);
      r[0] = static_cast<T>(sqrt(ce > 0 ? ce : 0.0));
      for (std::size_t j = 0; j < c; ++j)
        seeds[j] = static_cast<T>((p[j] - static_cast<double>(y[j])) / (2.0 * root));
      return 0.5 * ce;
    }
    default: {
      double f = 0.0;
      for (std::size_t k = 0; k < c; ++k) {
        double dl = 0.0;
        const double zk = static_cast<double>(z[k]);
        const double yk = static_cast<double>(y[k]);
        const double l = elementwise_loss(loss.kind, loss.huber_delta, zk, yk, &dl);
        f += l;
        // r = sign(e)√(2ℓ) for the symmetric losses, √(2ℓ) for bce; ∂r/∂z = ℓ'/r.
        double sign = 1.0;
        if (loss.kind != LossKind::kBce) sign = zk >= yk ? 1.0 : -1.0;
        const double root = sqrt(2.0 * (l > 0 ? l : 0.0));
        double dr = 0.0;
        if (loss.kind == LossKind::kHuber && fabs(zk - yk) <= loss.huber_delta) {
          dr = 1.0;  // r = e exactly in the quadratic zone
        } else {
          dr = dl / (sign * guarded_sqrt(2.0 * l));
        }
        r[k] = static_cast<T>(sign * root);
        for (std::size_t j = 0; j < c; ++j) seeds[k * c + j] = T(0);
        seeds[k * c + k] = static_cast<T>(dr);
      }
      return f;
    }
  }
}

}  // namespace lmtrain::kernels
