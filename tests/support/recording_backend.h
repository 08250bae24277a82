// A CPU backend whose queue records (DeviceQueue::record) the way a CUDA stream capture does, so
// that CI runs, without a GPU, the logic a CUDA graph relies on (issue 36, item 3).
//
// While `work` records, every call it makes is kept — with the arguments it was given, pointers
// and host scalars by value, as a captured kernel keeps its parameters — and nothing runs;
// replay() runs the kept calls again, in order, on whatever the buffers hold then.  A host value
// read at record time therefore stays that value in every replay, as on a GPU.  What a capture
// cannot hold fails the recording the same way: a host read (dot, read_scalars, potrf's status, a
// loss), a host→device copy (the CUDA backend's staging waits on the host), an allocation; the
// reason comes back in `why`, nothing of `work` has run, and the caller queues it again
// unrecorded.  refuse_under_capture(call) makes one more call refuse, as cuSOLVER may refuse
// capture; move_workspace() makes every earlier recording stale (QueueRecording::valid), as the
// CUDA backend's growing workspaces do.  Outside a recording every call runs at once on an
// ordinary CPU backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/error.h"

namespace lmtrain::testing {

template <typename T>
class RecordingCpuBackend final : public Backend<T> {
 public:
  RecordingCpuBackend() : inner_(make_cpu_backend<T>()), memory_(*this) {}

  // The call named `call` (e.g. "potrf_into") fails a recording from now on.
  void refuse_under_capture(std::string call) { refused_ = std::move(call); }
  // Every recording made so far becomes stale: replaying one throws, valid() is false.
  void move_workspace() { ++generation_; }
  // Recordings made and replays run so far.
  int recordings() const { return recordings_; }
  int replays() const { return replays_; }

  std::string name() const override { return "cpu, recording as a CUDA stream capture"; }
  DeviceKind device_kind() const override { return DeviceKind::kCpu; }
  MemoryResource& memory() override { return memory_; }
  std::size_t available_memory_bytes() const override { return inner_->available_memory_bytes(); }
  SlicePreference slice_preference(std::size_t n) const override {
    return inner_->slice_preference(n);
  }
  void synchronize() override { host_wait("synchronize"); }
  std::string thread_report() const override { return inner_->thread_report(); }
  std::unique_ptr<PhaseClock> make_phase_clock() override { return inner_->make_phase_clock(); }
  std::string why_not_recordable() const override { return {}; }
  std::unique_ptr<QueueRecording> record(const std::function<void()>& work,
                                         std::string& why) override {
    if (tape_) throw Error("RecordingCpuBackend: a recording inside a recording");
    tape_ = std::make_shared<std::vector<std::function<void()>>>();
    std::string failed;
    try {
      work();
    } catch (const std::exception& e) {
      failed = e.what();
    }
    if (failed.empty() && freed_under_capture_) failed = "a free under stream capture";
    freed_under_capture_ = false;
    std::shared_ptr<const std::vector<std::function<void()>>> tape = std::move(tape_);
    tape_.reset();
    if (!failed.empty()) {
      why = name() + ": the work could not be captured (" + failed + ")";
      return nullptr;
    }
    ++recordings_;
    return std::make_unique<Tape>(*this, std::move(tape));
  }

  // ---- LinearAlgebra ---------------------------------------------------------------------------
  void copy_from_host(const T* host, T* dst, std::size_t n) override {
    host_wait("copy_from_host");
    inner_->copy_from_host(host, dst, n);
  }
  void write_scalars(const double* host, double* device, std::size_t count) override {
    host_wait("write_scalars");
    inner_->write_scalars(host, device, count);
  }
  void copy(const T* src, T* dst, std::size_t n) override {
    queue("copy", [=, this] { inner_->copy(src, dst, n); });
  }
  void fill(T* x, std::size_t n, T value) override {
    queue("fill", [=, this] { inner_->fill(x, n, value); });
  }
  void convert(std::size_t n, const float* src, T* dst) override {
    queue("convert", [=, this] { inner_->convert(n, src, dst); });
  }
  void convert(std::size_t n, const double* src, T* dst) override {
    queue("convert", [=, this] { inner_->convert(n, src, dst); });
  }
  void gather_rows(const T* src, std::size_t cols, std::span<const std::int64_t> rows_host,
                   T* dst) override {
    host_wait("gather_rows");
    inner_->gather_rows(src, cols, rows_host, dst);
  }
  void axpy(std::size_t n, T alpha, const T* x, T* y) override {
    queue("axpy", [=, this] { inner_->axpy(n, alpha, x, y); });
  }
  void add_scaled(std::size_t n, const T* x, T alpha, const T* y, T* z) override {
    queue("add_scaled", [=, this] { inner_->add_scaled(n, x, alpha, y, z); });
  }
  void dot_into(std::size_t n, const T* x, const T* y, double* result) override {
    queue("dot_into", [=, this] { inner_->dot_into(n, x, y, result); });
  }
  void vector_norms(std::size_t n, const T* x, std::size_t stride, double* result) override {
    queue("vector_norms", [=, this] { inner_->vector_norms(n, x, stride, result); });
  }
  void axpy_if_ratio_holds(std::size_t n, T alpha, const T* x, T* y, const double* x_norms,
                           const double* y_norms, double lr, double ratio,
                           double* applied) override {
    queue("axpy_if_ratio_holds", [=, this] {
      inner_->axpy_if_ratio_holds(n, alpha, x, y, x_norms, y_norms, lr, ratio, applied);
    });
  }
  void scale_elementwise(std::size_t n, const T* x, const T* s, bool divide, T* y) override {
    queue("scale_elementwise", [=, this] { inner_->scale_elementwise(n, x, s, divide, y); });
  }
  void inverse_sqrt(std::size_t n, const T* x, T* y) override {
    queue("inverse_sqrt", [=, this] { inner_->inverse_sqrt(n, x, y); });
  }
  void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
            std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) override {
    queue("gemm",
          [=, this] { inner_->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                            T alpha, const T* a, std::size_t lda, std::size_t stride_a, const T* b,
                            std::size_t ldb, std::size_t stride_b, T beta, T* c, std::size_t ldc,
                            std::size_t stride_c, std::size_t count) override {
    queue("gemm_strided_batched", [=, this] {
      inner_->gemm_strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                                   c, ldc, stride_c, count);
    });
  }
  void gemv(Trans ta, std::size_t m, std::size_t n, T alpha, const T* a, std::size_t lda,
            const T* x, T beta, T* y) override {
    queue("gemv", [=, this] { inner_->gemv(ta, m, n, alpha, a, lda, x, beta, y); });
  }
  void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                T* c) override {
    queue("syrk_ata", [=, this] { inner_->syrk_ata(n, k, alpha, j, ldj, beta, c); });
  }
  void syrk_aat(std::size_t m, std::size_t n, T alpha, const T* j, std::size_t ldj, T beta,
                T* c) override {
    queue("syrk_aat", [=, this] { inner_->syrk_aat(m, n, alpha, j, ldj, beta, c); });
  }
  void reduce_upper(std::size_t n, std::size_t count, const T* partials, std::size_t ldp,
                    std::size_t stride, T beta, T* c) override {
    queue("reduce_upper",
          [=, this] { inner_->reduce_upper(n, count, partials, ldp, stride, beta, c); });
  }
  void symmetrize_upper(std::size_t n, T* a) override {
    queue("symmetrize_upper", [=, this] { inner_->symmetrize_upper(n, a); });
  }
  void copy_upper(std::size_t n, const T* src, T* dst) override {
    queue("copy_upper", [=, this] { inner_->copy_upper(n, src, dst); });
  }
  void potrf_into(std::size_t n, T* a, double* status) override {
    queue("potrf_into", [=, this] { inner_->potrf_into(n, a, status); });
  }
  void potrs(std::size_t n, const T* factor, T* b) override {
    queue("potrs", [=, this] { inner_->potrs(n, factor, b); });
  }
  void add_diagonal(std::size_t n, T* a, T lambda, const T* d) override {
    queue("add_diagonal", [=, this] { inner_->add_diagonal(n, a, lambda, d); });
  }
  void add_diagonal_from(std::size_t n, T* a, const double* lambda, const T* d) override {
    queue("add_diagonal_from", [=, this] { inner_->add_diagonal_from(n, a, lambda, d); });
  }
  void scale_symmetric(std::size_t n, T* a, const T* s) override {
    queue("scale_symmetric", [=, this] { inner_->scale_symmetric(n, a, s); });
  }
  void pack_upper(std::size_t n, const T* a, T* packed) override {
    queue("pack_upper", [=, this] { inner_->pack_upper(n, a, packed); });
  }
  void unpack_upper(std::size_t n, const T* packed, T* a) override {
    queue("unpack_upper", [=, this] { inner_->unpack_upper(n, packed, a); });
  }
  void column_sums_of_squares(std::size_t m, std::size_t n, const T* j, std::size_t ldj,
                              T* out) override {
    queue("column_sums_of_squares",
          [=, this] { inner_->column_sums_of_squares(m, n, j, ldj, out); });
  }
  void clamped_diagonal(std::size_t n, const T* a, T lo, T hi, T* d) override {
    queue("clamped_diagonal", [=, this] { inner_->clamped_diagonal(n, a, lo, hi, d); });
  }
  void clamp(std::size_t n, const T* x, T lo, T hi, T* y) override {
    queue("clamp", [=, this] { inner_->clamp(n, x, lo, hi, y); });
  }

  // ---- Backend ---------------------------------------------------------------------------------
  void add_bias_rows(std::size_t rows, std::size_t cols, const T* bias, T* z) override {
    queue("add_bias_rows", [=, this] { inner_->add_bias_rows(rows, cols, bias, z); });
  }
  void dense_forward(std::size_t batch, std::size_t out, std::size_t in, const T* x, const T* w,
                     const T* b, T* z) override {
    queue("dense_forward", [=, this] { inner_->dense_forward(batch, out, in, x, w, b, z); });
  }
  void activation_forward(Activation f, std::size_t n, const T* z, T* a) override {
    queue("activation_forward", [=, this] { inner_->activation_forward(f, n, z, a); });
  }
  void activation_derivative(Activation f, std::size_t n, const T* z, const T* a, T* d) override {
    queue("activation_derivative", [=, this] { inner_->activation_derivative(f, n, z, a, d); });
  }
  void scale_row_groups(std::size_t rows, std::size_t cols, std::size_t group, const T* d,
                        T* g) override {
    queue("scale_row_groups", [=, this] { inner_->scale_row_groups(rows, cols, group, d, g); });
  }
  void dense_jacobian(std::size_t rows, std::size_t out, std::size_t in, std::size_t group,
                      const T* g_out, const T* a_in, T* j, std::size_t ldj) override {
    queue("dense_jacobian",
          [=, this] { inner_->dense_jacobian(rows, out, in, group, g_out, a_in, j, ldj); });
  }
  void im2col(const WindowGeometry& g, std::size_t samples, const T* x, T* cols) override {
    queue("im2col", [=, this] { inner_->im2col(g, samples, x, cols); });
  }
  void col2im(const WindowGeometry& g, std::size_t samples, const T* cols, T* x) override {
    queue("col2im", [=, this] { inner_->col2im(g, samples, cols, x); });
  }
  void conv2d_forward(const WindowGeometry& g, std::size_t out_channels, std::size_t samples,
                      const T* x, const T* w, const T* bias, T* z, T* cols,
                      std::size_t cols_elements) override {
    queue("conv2d_forward", [=, this] {
      inner_->conv2d_forward(g, out_channels, samples, x, w, bias, z, cols, cols_elements);
    });
  }
  void add_channel_bias(std::size_t samples, std::size_t channels, std::size_t spatial,
                        const T* bias, T* z) override {
    queue("add_channel_bias",
          [=, this] { inner_->add_channel_bias(samples, channels, spatial, bias, z); });
  }
  void channel_sums(std::size_t rows, std::size_t channels, std::size_t spatial, const T* g_out,
                    T* j, std::size_t ldj) override {
    queue("channel_sums",
          [=, this] { inner_->channel_sums(rows, channels, spatial, g_out, j, ldj); });
  }
  void max_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y,
                        T* argmax) override {
    queue("max_pool_forward", [=, this] { inner_->max_pool_forward(g, samples, x, y, argmax); });
  }
  void max_pool_backward(const WindowGeometry& g, std::size_t rows, std::size_t group,
                         const T* argmax, const T* g_out, T* g_in) override {
    queue("max_pool_backward",
          [=, this] { inner_->max_pool_backward(g, rows, group, argmax, g_out, g_in); });
  }
  void avg_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y) override {
    queue("avg_pool_forward", [=, this] { inner_->avg_pool_forward(g, samples, x, y); });
  }
  void avg_pool_backward(const WindowGeometry& g, std::size_t rows, const T* g_out,
                         T* g_in) override {
    queue("avg_pool_backward", [=, this] { inner_->avg_pool_backward(g, rows, g_out, g_in); });
  }
  void loss_objective_into(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                           const T* y, double* objective) override {
    queue("loss_objective_into",
          [=, this] { inner_->loss_objective_into(loss, batch, c, z, y, objective); });
  }
  void loss_linearize_into(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                           const T* y, T* r, T* seeds, double* objective) override {
    queue("loss_linearize_into",
          [=, this] { inner_->loss_linearize_into(loss, batch, c, z, y, r, seeds, objective); });
  }

 protected:
  // Host reads: each waits on the host, which a capture cannot hold.
  void copy_to_host_impl(const T* src, T* host, std::size_t n) override {
    host_wait("copy_to_host");
    inner_->copy_to_host(src, host, n);
  }
  void read_scalars_impl(const double* device, double* host, std::size_t count) override {
    host_wait("read_scalars");
    inner_->read_scalars(device, host, count);
  }
  double dot_impl(std::size_t n, const T* x, const T* y) override {
    host_wait("dot");
    return inner_->dot(n, x, y);
  }
  double max_abs_impl(std::size_t n, const T* x) override {
    host_wait("max_abs");
    return inner_->max_abs(n, x);
  }
  bool all_finite_impl(std::size_t n, const T* x) override {
    host_wait("all_finite");
    return inner_->all_finite(n, x);
  }
  int potrf_impl(std::size_t n, T* a) override {
    host_wait("potrf");
    return inner_->potrf(n, a);
  }
  int potri_impl(std::size_t n, T* a) override {
    host_wait("potri");
    return inner_->potri(n, a);
  }
  int syevd_impl(std::size_t n, T* a, T* w) override {
    host_wait("syevd");
    return inner_->syevd(n, a, w);
  }
  int eigenvalues_impl(std::size_t n, T* a, T* w) override {
    host_wait("eigenvalues");
    return inner_->eigenvalues(n, a, w);
  }
  double loss_objective_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                             const T* z, const T* y) override {
    host_wait("loss_objective");
    return inner_->loss_objective(loss, batch, c, z, y);
  }
  double loss_linearize_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                             const T* z, const T* y, T* r, T* seeds) override {
    host_wait("loss_linearize");
    return inner_->loss_linearize(loss, batch, c, z, y, r, seeds);
  }

 private:
  // The kept calls of one recording; replay() refuses once the workspace has moved since.
  class Tape final : public QueueRecording {
   public:
    Tape(RecordingCpuBackend& backend,
         std::shared_ptr<const std::vector<std::function<void()>>> calls)
        : backend_(backend), calls_(std::move(calls)), generation_(backend.generation_) {}
    void replay() override {
      if (!valid())
        throw Error("a recording was replayed after its backend's workspace moved; record again");
      ++backend_.replays_;
      for (const auto& call : *calls_) call();
    }
    bool valid() const override { return backend_.generation_ == generation_; }

   private:
    RecordingCpuBackend& backend_;
    std::shared_ptr<const std::vector<std::function<void()>>> calls_;
    std::uint64_t generation_;
  };

  // Allocation through the backend's memory fails a recording, as cudaMalloc fails a capture.
  class Memory final : public MemoryResource {
   public:
    explicit Memory(RecordingCpuBackend& backend) : backend_(backend) {}
    void* allocate(std::size_t bytes) override {
      backend_.host_wait("an allocation");
      void* p = backend_.inner_->memory().allocate(bytes);
      count_allocation(bytes);
      return p;
    }
    void deallocate(void* p, std::size_t bytes) noexcept override {
      if (backend_.tape_) backend_.freed_under_capture_ = true;
      backend_.inner_->memory().deallocate(p, bytes);
      count_deallocation(bytes);
    }

   private:
    RecordingCpuBackend& backend_;
  };

  // Queued work: kept while recording (with a refusal where refuse_under_capture named it), run
  // at once otherwise.
  void queue(const char* call, std::function<void()> work) {
    if (!tape_) {
      work();
      return;
    }
    if (call == refused_) throw Error(std::string(call) + " refuses stream capture");
    tape_->push_back(std::move(work));
  }
  // What waits on the host or allocates: refused while recording, run at once otherwise.
  void host_wait(const char* what) const {
    if (tape_) throw Error(std::string(what) + " cannot run under stream capture");
  }

  std::unique_ptr<Backend<T>> inner_;
  Memory memory_;
  std::shared_ptr<std::vector<std::function<void()>>> tape_;  // while recording
  std::string refused_;
  bool freed_under_capture_ = false;
  std::uint64_t generation_ = 0;
  int recordings_ = 0;
  int replays_ = 0;
};

}  // namespace lmtrain::testing
