// Loss kernels.  The objective F is a deterministic two-pass sum of per-sample objectives (one
// thread per sample: each is O(C) work, and the softmax of a sample needs all its logits).  The
// linearization then writes residuals and seeds with one thread per *seed entry*: the exact
// cross-entropy has C² seeds per sample, which one thread per sample wrote serially.  Every entry
// is computed by the formulas the CPU runs (backend/loss_math.h); nothing is accumulated across
// threads except F, so the bits do not depend on scheduling.
#include "../loss_math.h"
#include "launch.h"

namespace lmtrain::cuda {
namespace {

template <typename T>
struct SampleObjective {
  LossParams<T> loss;
  std::size_t c;
  const T* z;
  const T* y;
  __device__ double operator()(std::size_t b) const {
    return kernels::sample_objective(loss, c, z + b * c, y + b * kernels::target_stride(loss, c));
  }
};

// Sample b's objective as loss_linearize reports it; for the cross-entropy kinds it also leaves
// the softmax in probabilities[b·c …] and in per_sample[b] the sample's CE (√CE) or its drawn
// class (cross_entropy_sampled), for the entry kernel.  Every sample is visited exactly once by
// reduce_to_partials' grid-stride loop.
template <typename T>
struct SampleLinearizationObjective {
  LossParams<T> loss;
  std::size_t c;
  const T* z;
  const T* y;
  double* probabilities;  // batch·c, or null (mse, elementwise)
  double* per_sample;     // batch, or null (all but √CE and cross_entropy_sampled)
  __device__ double operator()(std::size_t b) const {
    double* p = probabilities != nullptr ? probabilities + b * c : nullptr;
    const T* yb = y + b * kernels::target_stride(loss, c);
    const double f = kernels::sample_linearization_objective(loss, c, z + b * c, yb, p);
    if (loss.kind == LossKind::kCrossEntropySqrt) {
      per_sample[b] = 2.0 * f;  // f = ½CE (unweighted)
    } else if (loss.kind == LossKind::kCrossEntropySampled) {
      const double u = kernels::draw_uniform(loss.draw_key, b);
      per_sample[b] = static_cast<double>(kernels::sample_class_index(c, p, yb, u));
    }
    return loss.sample_weighted ? kernels::sample_weight(loss, c, yb) * f : f;
  }
};

// Entry e = (row·c + j) of the seeds, row = b·R + k: seeds[e] = ∂r_{b,k}/∂z_{b,j}; the thread
// of j = 0 also writes the residual r[row].  A weighted sample's entries are then scaled by √w.
// Consecutive threads write consecutive entries.
template <typename T>
__global__ void linearize_entries_kernel(LossParams<T> loss, std::size_t batch, std::size_t c,
                                         std::size_t rows_per_sample, const T* z, const T* y,
                                         const double* probabilities, const double* per_sample,
                                         T* r, T* seeds) {
  const std::size_t entries = batch * rows_per_sample * c;
  for (std::size_t e = thread_index(); e < entries; e += grid_size()) {
    const std::size_t row = e / c;
    const std::size_t j = e - row * c;
    const std::size_t b = row / rows_per_sample;
    const std::size_t k = row - b * rows_per_sample;
    const T* zb = z + b * c;
    const T* yb = y + b * kernels::target_stride(loss, c);
    switch (loss.kind) {
      case LossKind::kMse: {
        const double sw = kernels::mse_root_weight(loss, k);
        seeds[e] = j == k ? static_cast<T>(sw) : T(0);
        if (j == 0)
          r[row] = static_cast<T>(sw * (static_cast<double>(zb[k]) - static_cast<double>(yb[k])));
        break;
      }
      case LossKind::kCrossEntropy: {
        const double* p = probabilities + b * c;
        const double sk = kernels::cross_entropy_scale(p[k]);
        seeds[e] = static_cast<T>(kernels::cross_entropy_seed(sk, p[k], p[j], j == k));
        if (j == 0)
          r[row] =
              static_cast<T>(kernels::cross_entropy_residual(p[k], static_cast<double>(yb[k])));
        break;
      }
      case LossKind::kCrossEntropySqrt: {  // one row per sample: k = 0
        const double ce = per_sample[b];
        seeds[e] = static_cast<T>(kernels::cross_entropy_sqrt_seed(ce, probabilities[b * c + j],
                                                                   static_cast<double>(yb[j])));
        if (j == 0) r[row] = static_cast<T>(kernels::cross_entropy_sqrt_residual(ce));
        break;
      }
      case LossKind::kCrossEntropySampled: {  // one row per sample: k = 0
        const double* p = probabilities + b * c;
        const auto drawn = static_cast<std::size_t>(per_sample[b]);
        const kernels::SampledClass s =
            kernels::sampled_class_at(drawn, p[drawn], static_cast<double>(yb[drawn]));
        seeds[e] = static_cast<T>(kernels::cross_entropy_sampled_seed(s, p[j], j == drawn));
        if (j == 0) r[row] = static_cast<T>(s.residual);
        break;
      }
      default: {
        if (j != k && j != 0) {
          seeds[e] = T(0);
          break;
        }
        const kernels::ElementwiseLinearization lin = kernels::elementwise_linearize(
            loss.kind, loss.huber_delta, static_cast<double>(zb[k]), static_cast<double>(yb[k]));
        seeds[e] = j == k ? static_cast<T>(lin.derivative) : T(0);
        if (j == 0) r[row] = static_cast<T>(lin.residual);
        break;
      }
    }
    if (loss.sample_weighted) {  // √w times the stored entries, as the CPU's sample_linearize
      const double root = sqrt(kernels::sample_weight(loss, c, yb));
      seeds[e] = kernels::weighted_entry(root, seeds[e]);
      if (j == 0) r[row] = kernels::weighted_entry(root, r[row]);
    }
  }
}

}  // namespace

template <typename T>
void loss_objective(cudaStream_t stream, const LossParams<T>& loss, std::size_t batch,
                    std::size_t c, const T* z, const T* y, double* partials, double* result) {
  reduce(stream, batch, SampleObjective<T>{loss, c, z, y}, SumOp{}, partials, result);
}

template <typename T>
void loss_linearize(cudaStream_t stream, const LossParams<T>& loss, std::size_t batch,
                    std::size_t c, const T* z, const T* y, T* r, T* seeds, double* scratch,
                    double* partials, double* result) {
  const std::size_t rows = residuals_per_sample(loss.kind, c);
  double* probabilities = loss_needs_scratch(loss.kind) ? scratch : nullptr;
  double* per_sample =
      loss_scratch_doubles(loss.kind, batch, c) > batch * c ? scratch + batch * c : nullptr;
  reduce(stream, batch, SampleLinearizationObjective<T>{loss, c, z, y, probabilities, per_sample},
         SumOp{}, partials, result);
  const std::size_t entries = batch * rows * c;
  linearize_entries_kernel<<<blocks_for(entries), kThreads, 0, stream>>>(
      loss, batch, c, rows, z, y, probabilities, per_sample, r, seeds);
  CUDA_CHECK_LAUNCH();
}

#define LMTRAIN_INSTANTIATE(T)                                                                  \
  template void loss_objective<T>(cudaStream_t, const LossParams<T>&, std::size_t, std::size_t, \
                                  const T*, const T*, double*, double*);                        \
  template void loss_linearize<T>(cudaStream_t, const LossParams<T>&, std::size_t, std::size_t, \
                                  const T*, const T*, T*, T*, double*, double*, double*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
