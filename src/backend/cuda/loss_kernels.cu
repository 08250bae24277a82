// Loss kernels: one thread per sample runs the per-sample code the CPU backend runs
// (backend/loss_math.h), and the per-sample objectives are summed deterministically.
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
    return kernels::sample_objective(loss, c, z + b * c, y + b * c);
  }
};

// Writes sample b's residuals and seed rows as a side effect; every sample is visited exactly
// once by the grid-stride loop of reduce_to_partials.
template <typename T>
struct SampleLinearization {
  LossParams<T> loss;
  std::size_t c;
  std::size_t rows;  // residuals per sample
  const T* z;
  const T* y;
  T* r;
  T* seeds;
  double* scratch;
  __device__ double operator()(std::size_t b) const {
    return kernels::sample_linearize(loss, c, z + b * c, y + b * c, r + b * rows,
                                     seeds + b * rows * c,
                                     scratch != nullptr ? scratch + b * c : nullptr);
  }
};

}  // namespace

template <typename T>
void loss_objective(cudaStream_t stream, const LossParams<T>& loss, std::size_t batch,
                    std::size_t c, const T* z, const T* y, double* partials) {
  reduce(stream, batch, SampleObjective<T>{loss, c, z, y}, SumOp{}, partials);
}

template <typename T>
void loss_linearize(cudaStream_t stream, const LossParams<T>& loss, std::size_t batch,
                    std::size_t c, const T* z, const T* y, T* r, T* seeds, double* scratch,
                    double* partials) {
  const std::size_t rows = residuals_per_sample(loss.kind, c);
  reduce(stream, batch, SampleLinearization<T>{loss, c, rows, z, y, r, seeds, scratch}, SumOp{},
         partials);
}

#define LMTRAIN_INSTANTIATE(T)                                                                  \
  template void loss_objective<T>(cudaStream_t, const LossParams<T>&, std::size_t, std::size_t, \
                                  const T*, const T*, double*);                                 \
  template void loss_linearize<T>(cudaStream_t, const LossParams<T>&, std::size_t, std::size_t, \
                                  const T*, const T*, T*, T*, double*, double*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
