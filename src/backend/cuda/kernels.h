// Host-side launchers of lmtrain's own CUDA kernels.  Each one enqueues its work on `stream` and
// returns at once; a bad launch throws BackendError (cuda_check.h).  Pointers are device
// pointers.  Defined, and explicitly instantiated for float and double, in the .cu files named
// beside each group, so that cuda_backend.cpp is plain C++ compiled with the project's warnings.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lmtrain/core/activation.h"
#include "lmtrain/core/loss_kind.h"

namespace lmtrain::cuda {

// Reductions run in two deterministic passes (per-block partial sums, then one block over the
// partials) so a result does not depend on thread scheduling: the same inputs give the same bits,
// which the multi-rank invariant of DESIGN.md §6 relies on.  `partials` holds kReductionBlocks
// doubles of scratch (3·kReductionBlocks for vector_norms); the result goes to `result`, a device
// double (the backend's own, read back at once, or the caller's of a *_into call).
inline constexpr unsigned kReductionBlocks = 1024;

// ---- elementwise_kernels.cu ---------------------------------------------------------------------
template <typename T>
void fill(cudaStream_t stream, T* x, std::size_t n, T value);
// dst_i = src_i rounded to D (float ↔ double; same-type is a copy).
template <typename S, typename D>
void convert(cudaStream_t stream, std::size_t n, const S* src, D* dst);
template <typename T>
void axpy(cudaStream_t stream, std::size_t n, T alpha, const T* x, T* y);
template <typename T>
void add_scaled(cudaStream_t stream, std::size_t n, const T* x, T alpha, const T* y, T* z);
// y += αx when kernels::geodesic_ratio_holds(x_norms[2], y_norms[2], lr, ratio) (step_math.h),
// *applied = 1 then, else 0 (LinearAlgebra::axpy_if_ratio_holds).  Norms and flag on the device.
template <typename T>
void axpy_if_ratio_holds(cudaStream_t stream, std::size_t n, T alpha, const T* x, T* y,
                         const double* x_norms, const double* y_norms, double lr, double ratio,
                         double* applied);
template <typename T>
void scale_elementwise(cudaStream_t stream, std::size_t n, const T* x, const T* s, bool divide,
                       T* y);
template <typename T>
void inverse_sqrt(cudaStream_t stream, std::size_t n, const T* x, T* y);
template <typename T>
void activation_forward(cudaStream_t stream, Activation f, std::size_t n, const T* z, T* a);
template <typename T>
void activation_derivative(cudaStream_t stream, Activation f, std::size_t n, const T* z, const T* a,
                           T* d);

// ---- layer_kernels.cu ---------------------------------------------------------------------------
// `rows` is a device array of `count` row indices.
template <typename T>
void gather_rows(cudaStream_t stream, const T* src, std::size_t cols, const std::int64_t* rows,
                 std::size_t count, T* dst);
template <typename T>
void add_bias_rows(cudaStream_t stream, std::size_t rows, std::size_t cols, const T* bias, T* z);
template <typename T>
void scale_row_groups(cudaStream_t stream, std::size_t rows, std::size_t cols, std::size_t group,
                      const T* d, T* g);
template <typename T>
void dense_jacobian(cudaStream_t stream, std::size_t rows, std::size_t out, std::size_t in,
                    std::size_t group, const T* g_out, const T* a_in, T* j, std::size_t ldj);

// ---- matrix_kernels.cu (n × n row-major, upper triangle as in backend.h)
// -------------------------
template <typename T>
void symmetrize_upper(cudaStream_t stream, std::size_t n, T* a);
template <typename T>
void copy_upper(cudaStream_t stream, std::size_t n, const T* src, T* dst);
template <typename T>
void reduce_upper(cudaStream_t stream, std::size_t n, std::size_t count, const T* partials,
                  std::size_t ldp, std::size_t stride, T beta, T* c);
// The inverse (LLᵀ)⁻¹ from a column-major lower factor in `a`, built k columns at a time
// (cuda_backend.cpp, potri): identity_columns writes columns [j0, j0 + count) of I (column-major,
// n × count) into b; after a solve turns them into columns of the inverse X,
// store_inverse_columns puts their part above the diagonal into a's strictly upper triangle
// (column-major: the factor's unused half) and X_jj into diagonal[j]; finish_inverse copies that
// half over the factor's (row-major: strict lower → strict upper) and writes the diagonal.
template <typename T>
void identity_columns(cudaStream_t stream, std::size_t n, std::size_t j0, std::size_t count, T* b);
template <typename T>
void store_inverse_columns(cudaStream_t stream, std::size_t n, std::size_t j0, std::size_t count,
                           const T* block, T* a, T* diagonal);
template <typename T>
void finish_inverse(cudaStream_t stream, std::size_t n, const T* diagonal, T* a);
// *status = *info as a double: a factorization's status left on the device (potrf_into).
void store_status(cudaStream_t stream, const int* info, double* status);
template <typename T>
void add_diagonal(cudaStream_t stream, std::size_t n, T* a, T lambda, const T* d);
template <typename T>
void add_diagonal_from(cudaStream_t stream, std::size_t n, T* a, const double* lambda, const T* d);
template <typename T>
void scale_symmetric(cudaStream_t stream, std::size_t n, T* a, const T* s);
// y_i = clamp(x[i·stride], lo, hi): a vector (stride 1) or a matrix diagonal (stride n + 1).
template <typename T>
void clamp_strided(cudaStream_t stream, std::size_t n, const T* x, std::size_t stride, T lo, T hi,
                   T* y);
template <typename T>
void pack_upper(cudaStream_t stream, std::size_t n, const T* a, T* packed);
template <typename T>
void unpack_upper(cudaStream_t stream, std::size_t n, const T* packed, T* a);
// out_c = Σ_r J[r, c]² over column_sum_chunks(m, n) chunks of rows in parallel, summed in double
// in a fixed order; `partials` holds chunks · n doubles (unused with one chunk).
std::size_t column_sum_chunks(std::size_t m, std::size_t n);
template <typename T>
void column_sums_of_squares(cudaStream_t stream, std::size_t m, std::size_t n, const T* j,
                            std::size_t ldj, double* partials, T* out);

// ---- reduction_kernels.cu (n = 0 gives the identity: 0, or +∞ for first_zero_on_diagonal)
// ----------------------------------------------------------------
template <typename T>
void dot(cudaStream_t stream, std::size_t n, const T* x, const T* y, double* partials,
         double* result);
template <typename T>
void max_abs(cudaStream_t stream, std::size_t n, const T* x, double* partials, double* result);
// Number of elements that are NaN or ±inf.
template <typename T>
void count_nonfinite(cudaStream_t stream, std::size_t n, const T* x, double* partials,
                     double* result);
// The smallest i with a[i·(n + 1)] == 0 (a zero on an n × n matrix's diagonal), as a double;
// +∞ when there is none.
template <typename T>
void first_zero_on_diagonal(cudaStream_t stream, std::size_t n, const T* a, double* partials,
                            double* result);
// result[0..2] = the number of non-finite x[i·stride], max |x[i·stride]| (NaNs skipped), and
// Σ x[i·stride]² (summed as dot sums), i < n; `partials` holds 3·kReductionBlocks doubles.
template <typename T>
void vector_norms(cudaStream_t stream, std::size_t n, const T* x, std::size_t stride,
                  double* partials, double* result);

// ---- loss_kernels.cu (batch > 0): the per-sample and per-entry code of backend/loss_math.h;
// the objective F is reduced like the reductions above. --------------------------------------
template <typename T>
void loss_objective(cudaStream_t stream, const LossParams<T>& loss, std::size_t batch,
                    std::size_t c, const T* z, const T* y, double* partials, double* result);
// `scratch` holds loss_scratch_doubles(kind, batch, c) doubles (null when that is 0).
template <typename T>
void loss_linearize(cudaStream_t stream, const LossParams<T>& loss, std::size_t batch,
                    std::size_t c, const T* z, const T* y, T* r, T* seeds, double* scratch,
                    double* partials, double* result);

// True when loss_linearize needs scratch (the softmax probabilities of the batch).
constexpr bool loss_needs_scratch(LossKind kind) {
  return is_softmax_loss(kind);
}
// Its size: batch·c probabilities, plus one double per sample: its CE for √CE, its drawn class
// for cross_entropy_sampled.
constexpr std::size_t loss_scratch_doubles(LossKind kind, std::size_t batch, std::size_t c) {
  if (!loss_needs_scratch(kind)) return 0;
  return batch * c + (kind == LossKind::kCrossEntropy ? 0 : batch);
}

}  // namespace lmtrain::cuda
