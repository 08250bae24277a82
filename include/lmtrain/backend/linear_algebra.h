// Dense linear algebra on one device: transfers, BLAS levels 1–3, the factorizations of the
// normal matrix and the few reductions the LM step needs.  solve/ depends on this part of a
// backend only; the neural-network kernels are in backend.h.
//
// Conventions: every pointer argument is a *device* pointer from the queue's own MemoryResource
// unless its name says `host`; only scalars (losses, norms, factorization status) come back to
// the host, and each call that brings data back is a counted read (DeviceQueue::host_reads): a
// non-virtual member that counts and calls its backend's protected *_impl.  Where several
// scalars decide one thing, the *_into calls leave them in device doubles and read_scalars
// brings them back together, in one read.  Matrices are dense
// row-major with an explicit leading dimension (elements between consecutive rows).  The normal
// matrix A (n × n) is symmetric; SYRK writes its upper triangle in row-major order, which is the
// lower triangle in LAPACK's column-major view — factorization routines below are told so, and
// callers never read the other triangle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "lmtrain/backend/device_queue.h"
#include "lmtrain/backend/normal_matrix_method.h"

namespace lmtrain {

enum class Trans { kNo, kYes };

template <typename T>
class LinearAlgebra : public DeviceQueue {
 public:
  DeviceBuffer<T> allocate(std::size_t count) { return DeviceBuffer<T>(memory(), count); }

  // ---- transfers and fills ------------------------------------------------------------------
  // Copies n values from host memory to the device buffer dst, ordered after the work already
  // queued on this backend and before any queued later.  Returns once `host` has been read: the
  // caller may overwrite or free it at once (a temporary is fine).  The device may still be
  // copying: the CUDA backend sends small copies from its own pinned staging buffer and makes
  // large ones synchronous.
  virtual void copy_from_host(const T* host, T* dst, std::size_t n) = 0;
  // Copies n values from the device buffer src to host memory after the queued work; blocks until
  // they are in `host`.  One read.
  void copy_to_host(const T* src, T* host, std::size_t n) {
    this->count_host_read();
    copy_to_host_impl(src, host, n);
  }
  // `count` doubles at `device` (what *_into calls left there) to host memory after the queued
  // work, in one read.
  void read_scalars(const double* device, double* host, std::size_t count) {
    this->count_host_read();
    read_scalars_impl(device, host, count);
  }
  // `count` host doubles to the device doubles at `device` (where *_into calls leave theirs),
  // ordered as copy_from_host; returns once `host` has been read.  Not a read.
  virtual void write_scalars(const double* host, double* device, std::size_t count) = 0;
  // Device to device; overlapping ranges behave like memmove.
  virtual void copy(const T* src, T* dst, std::size_t n) = 0;
  virtual void fill(T* x, std::size_t n, T value) = 0;
  // dst_i = src_i rounded to T: precision changes between this backend and its sibling of the
  // other precision on the same device (mixed precision: float32 J, float64 A).  Ordered after
  // this backend's queued work; the caller synchronizes the source's backend first.
  virtual void convert(std::size_t n, const float* src, T* dst) = 0;
  virtual void convert(std::size_t n, const double* src, T* dst) = 0;
  // dst[i, :] = src[rows_host[i], :] for a row-major src with `cols` columns.  rows_host is host
  // memory, read before the call returns (as copy_from_host).
  virtual void gather_rows(const T* src, std::size_t cols, std::span<const std::int64_t> rows_host,
                           T* dst) = 0;

  // ---- level 1 (reductions accumulate in double; each returning one is a read) -----------------
  virtual void axpy(std::size_t n, T alpha, const T* x, T* y) = 0;  // y += αx
  // z = x + αy (z may alias x or y).
  virtual void add_scaled(std::size_t n, const T* x, T alpha, const T* y, T* z) = 0;
  double dot(std::size_t n, const T* x, const T* y) {
    this->count_host_read();
    return dot_impl(n, x, y);
  }
  double max_abs(std::size_t n, const T* x) {
    this->count_host_read();
    return max_abs_impl(n, x);
  }
  bool all_finite(std::size_t n, const T* x) {
    this->count_host_read();
    return all_finite_impl(n, x);
  }
  // dot's sum left on the device: *result = Σ x_i y_i (the bits dot returns).  No read.
  virtual void dot_into(std::size_t n, const T* x, const T* y, double* result) = 0;
  // Three figures of x_i = x[i·stride], i < n (stride 1: a vector; n + 1: an n × n matrix's
  // diagonal), in one pass, left on the device: result[0] = how many are NaN or ±∞, result[1] =
  // max |x_i| (NaNs skipped, as max_abs), result[2] = Σ x_i².  What the LM step checks of g, A's
  // diagonal, D and δ, read with the step's other scalars.  n = 0 gives {0, 0, 0}.  No read.
  virtual void vector_norms(std::size_t n, const T* x, std::size_t stride, double* result) = 0;
  // y += αx when x passes geodesic acceleration's ratio test (geodesic_acceleration.h), decided
  // on the device: with a = √x_norms[2] and v = lr·√y_norms[2] (vector_norms of x and of y, y
  // before this call), when a is finite and 2a ≤ ratio·v; *applied = 1 then, else 0 and y
  // unchanged.  The LM step reads `applied` with its trial's scalars.  No read.
  virtual void axpy_if_ratio_holds(std::size_t n, T alpha, const T* x, T* y, const double* x_norms,
                                   const double* y_norms, double lr, double ratio,
                                   double* applied) = 0;
  // y_i = x_i * s_i (or x_i / s_i when `divide`).
  virtual void scale_elementwise(std::size_t n, const T* x, const T* s, bool divide, T* y) = 0;

  // y_i = 1 / √x_i.
  virtual void inverse_sqrt(std::size_t n, const T* x, T* y) = 0;

  // ---- level 2 / 3 ------------------------------------------------------------------------------
  // C(m×n) = α op(A) op(B) + β C, row-major.
  virtual void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                    const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
                    std::size_t ldc) = 0;
  // Batched C_b = α op(A_b) op(B_b) + β C_b for b < count, X_b = x + b·stride_x (row-major as
  // gemm), in one launch where the device has one.  A stride of 0 shares one matrix across the
  // batch (a convolution's weights).
  virtual void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                                    T alpha, const T* a, std::size_t lda, std::size_t stride_a,
                                    const T* b, std::size_t ldb, std::size_t stride_b, T beta, T* c,
                                    std::size_t ldc, std::size_t stride_c, std::size_t count) = 0;
  // y = α op(A) x + β y with A (m × n) row-major.
  virtual void gemv(Trans ta, std::size_t m, std::size_t n, T alpha, const T* a, std::size_t lda,
                    const T* x, T beta, T* y) = 0;
  // Upper triangle (row-major) of C(n×n) = α JᵀJ + β C, J (k × n) row-major.  The SYRK of A +=
  // JₛᵀJₛ.
  virtual void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                        T* c) = 0;
  // How this backend forms A = JᵀJ (syrk_ata) and why, for the Summary: the CUDA backend's
  // per-shape choice between cuBLAS's SYRK and split-K, with the times it measured
  // (syrk_choice.h).  Empty on the CPU, whose syrk_ata is always OpenBLAS's SYRK.
  virtual std::string normal_matrix_report() const { return {}; }
  // Forms A (syrk_ata) on TF32 tensor cores from now on (SolverOptions::tf32); returns false,
  // changing nothing, where the backend has no TF32 arithmetic (a float64 backend, the CPU).
  virtual bool use_tf32(bool /*on*/) { return false; }
  // How syrk_ata forms A from now on (normal_matrix_method.h); false where the backend has no
  // choice (then its SYRK).
  virtual bool set_normal_matrix_method(NormalMatrixMethod /*method*/) { return false; }
  // Upper triangle (row-major) of C(m×m) = α JJᵀ + β C, J (m × n) row-major.  The dual form's Gram.
  virtual void syrk_aat(std::size_t m, std::size_t n, T alpha, const T* j, std::size_t ldj, T beta,
                        T* c) = 0;
  // Upper triangle (row-major) of C (n × n) = β C + Σ_{b < count} P_b, P_b = partials + b·stride
  // (n × n, row stride ldp ≥ n): each element's terms added in the order b = 0, 1, … in double and
  // rounded to T once, so the result's bits depend on the inputs only, never on the scheduling.
  // The fixed-order reduction of split-K (split_k_syrk.h).  β = 0: C is not read.  C's strict
  // lower triangle is left as it was, as syrk_ata leaves it.
  virtual void reduce_upper(std::size_t n, std::size_t count, const T* partials, std::size_t ldp,
                            std::size_t stride, T beta, T* c) = 0;
  // Copies the upper triangle (row-major) into the lower one.
  virtual void symmetrize_upper(std::size_t n, T* a) = 0;
  // dst's upper triangle (row-major, diagonal included) = src's; dst's strict lower triangle is
  // left as it was.  What a factorization of the upper triangle needs of A: half the bytes of a
  // full copy (the Cholesky solver's copy of A on every λ retry).
  virtual void copy_upper(std::size_t n, const T* src, T* dst) = 0;

  // ---- dense factorizations on the upper triangle (row-major; the status is a read)
  // ---------------- Cholesky in place; returns 0 on success, k > 0 if the leading minor of order k
  // is not positive definite (a recoverable event: the LM step raises λ).
  int potrf(std::size_t n, T* a) {
    this->count_host_read();
    return potrf_impl(n, a);
  }
  // potrf with its status left on the device (*status = what potrf returns, as a double), so the
  // solve goes on queued and the caller reads the verdict with its other scalars.  No read.
  // After a failed factorization `a` holds a partial factor: solving with it gives meaningless
  // values, never an error.
  virtual void potrf_into(std::size_t n, T* a, double* status) = 0;
  // Solves (LLᵀ) x = b in place on b with the factor from potrf.  No read.
  virtual void potrs(std::size_t n, const T* factor, T* b) = 0;
  // (LLᵀ)⁻¹ in place from potrf's factor (upper triangle valid afterwards); returns 0, or k > 0
  // if the factor's k-th diagonal entry is zero.  Bayesian relevance groups read its diagonal.
  int potri(std::size_t n, T* a) {
    this->count_host_read();
    return potri_impl(n, a);
  }
  // Symmetric eigendecomposition in place: a ← eigenvectors as *rows* (a[i, :] is the i-th
  // eigenvector), w ← eigenvalues ascending.  Returns 0 on success.
  int syevd(std::size_t n, T* a, T* w) {
    this->count_host_read();
    return syevd_impl(n, a, w);
  }
  // The eigenvalues alone (ascending into w; a is destroyed): a third of syevd's work.
  int eigenvalues(std::size_t n, T* a, T* w) {
    this->count_host_read();
    return eigenvalues_impl(n, a, w);
  }
  // a_ii += λ d_i (d == nullptr: d ≡ 1).
  virtual void add_diagonal(std::size_t n, T* a, T lambda, const T* d) = 0;
  // The same with λ read on the device from `lambda` (one double in device memory, rounded to T
  // as a host λ is): add_diagonal's bits, and queued work that a recording (DeviceQueue::record)
  // replays with whatever λ the slot holds then — one graph for every attempt of a step.
  virtual void add_diagonal_from(std::size_t n, T* a, const double* lambda, const T* d) = 0;
  // a_ij *= s_i s_j, i.e. a ← SAS with S = diag(s) (upper triangle only).
  virtual void scale_symmetric(std::size_t n, T* a, const T* s) = 0;
  // Upper triangle (row-major) of a (n × n) ↔ n(n+1)/2 contiguous values, row by row: what ranks
  // all-reduce instead of the whole matrix.
  virtual void pack_upper(std::size_t n, const T* a, T* packed) = 0;
  virtual void unpack_upper(std::size_t n, const T* packed, T* a) = 0;
  // out_j = Σ_r J[r, j]² for J (m × n) row-major: diag(JᵀJ) without forming JᵀJ.
  virtual void column_sums_of_squares(std::size_t m, std::size_t n, const T* j, std::size_t ldj,
                                      T* out) = 0;
  // d_i = clamp(a_ii, lo, hi).
  virtual void clamped_diagonal(std::size_t n, const T* a, T lo, T hi, T* d) = 0;
  // y_i = clamp(x_i, lo, hi) (y may alias x).
  virtual void clamp(std::size_t n, const T* x, T lo, T hi, T* y) = 0;

 protected:
  // What the counted reads above do on the device.
  virtual void copy_to_host_impl(const T* src, T* host, std::size_t n) = 0;
  virtual void read_scalars_impl(const double* device, double* host, std::size_t count) = 0;
  virtual double dot_impl(std::size_t n, const T* x, const T* y) = 0;
  virtual double max_abs_impl(std::size_t n, const T* x) = 0;
  virtual bool all_finite_impl(std::size_t n, const T* x) = 0;
  virtual int potrf_impl(std::size_t n, T* a) = 0;
  virtual int potri_impl(std::size_t n, T* a) = 0;
  virtual int syevd_impl(std::size_t n, T* a, T* w) = 0;
  virtual int eigenvalues_impl(std::size_t n, T* a, T* w) = 0;
};

// Linear algebra of precision S on the same device as `device` (its own queue and handles): the
// float64 side of mixed precision.
template <typename S>
std::unique_ptr<LinearAlgebra<S>> make_sibling_backend(const DeviceQueue& device);

}  // namespace lmtrain
