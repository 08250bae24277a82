// The NCCL communicator (DESIGN.md §6): GPU ranks sum device buffers with NCCL, everything else
// (scalars, host buffers, the bootstrap, ending the job) goes through the host communicator it
// wraps.  NCCL runs non-blocking so that no call can hang a rank: every wait polls
// ncclCommGetAsyncError, and an error or a timeout aborts the NCCL communicator, then the job.
// NCCL itself is loaded on first use (nccl_library.h says why).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "forwarding_communicator.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"
#include "nccl_library.h"

namespace lmtrain::dist {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kDefaultTimeoutSeconds = 300;
// The exit code of a job ended by a failed NCCL call, the CLI's code for errors (cli/main.cpp).
constexpr int kFailureExitCode = 2;

double timeout_from_environment() {
  const char* text = std::getenv("LMTRAIN_NCCL_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*end != '\0' || !std::isfinite(seconds) || seconds <= 0)
    throw InvalidArgument(fmt::format(
        "LMTRAIN_NCCL_TIMEOUT_S=\"{}\" is not a positive number of seconds; set it to how long a "
        "rank may wait for an NCCL collective, or unset it for the default of {} s",
        text, kDefaultTimeoutSeconds));
  return seconds;
}

const char* result_name(ncclResult_t result) noexcept {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult_t (unlisted value)";
  }
}

// "ncclRemoteError (remote process exited or there was a network error): <ncclGetLastError>".
std::string describe(const NcclLibrary& nccl, ncclResult_t result, ncclComm_t comm) {
  std::string text = fmt::format("{} ({})", result_name(result), nccl.get_error_string(result));
  const char* last = nccl.get_last_error(comm);
  if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  return text;
}

std::string describe(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorName(status), cudaGetErrorString(status));
}

// Makes `device` the calling thread's current CUDA device (NCCL creates communicators and
// enqueues collectives on it) and restores the previous one on destruction.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
  }
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  cudaError_t status() const noexcept { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

class NcclCommunicator final : public ForwardingCommunicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, int device)
      : ForwardingCommunicator(std::move(host)),
        host_(&to()),
        device_(device),
        timeout_(timeout_from_environment()) {
    int devices = 0;
    if (const cudaError_t status = cudaGetDeviceCount(&devices); status != cudaSuccess)
      fail(fmt::format("cudaGetDeviceCount failed: {}", describe(status)));
    if (device_ < 0 || device_ >= devices)
      fail(
          fmt::format("CUDA device {} does not exist ({} visible); give each rank a device index "
                      "in [0, {}) or check CUDA_VISIBLE_DEVICES",
                      device_, devices, devices));
    const CurrentDevice current(device_);
    if (current.status() != cudaSuccess)
      fail(fmt::format("cudaSetDevice({}) failed: {}", device_, describe(current.status())));
    try {
      nccl_ = &nccl_library();
    } catch (const Error& e) {
      fail(e.what());
    }

    ncclUniqueId id{};
    if (host_->rank() == 0) check(nccl_->get_unique_id(&id), "ncclGetUniqueId");
    host_->broadcast(&id, sizeof id, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check(nccl_->comm_init_rank_config(&comm_, host_->size(), id, host_->rank(), &config),
          "ncclCommInitRankConfig");
    wait(nullptr, "ncclCommInitRankConfig");
  }

  ~NcclCommunicator() override {
    if (comm_ == nullptr) return;
    // Finalize flushes this rank's operations and waits for the peers; a communicator that
    // cannot get there (an error, a dead peer) is aborted instead.
    const CurrentDevice current(device_);
    const ncclResult_t finalized = nccl_->comm_finalize(comm_);
    if ((finalized == ncclSuccess || finalized == ncclInProgress) && poll(nullptr).empty())
      nccl_->comm_destroy(comm_);
    else
      nccl_->comm_abort(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string name() const override {
    const std::string host = host_->name();
    if (host == "local") return fmt::format("nccl {} (1 rank)", nccl_->version);
    return fmt::format("nccl {} over {}", nccl_->version, host);
  }
  void* nccl_comm() const override { return comm_; }
  bool supports_device_buffers() const override { return true; }
  void allreduce_sum_device(float* device_data, std::size_t n, void* cuda_stream) override {
    allreduce(device_data, n, ncclFloat32, "float", cuda_stream);
  }
  void allreduce_sum_device(double* device_data, std::size_t n, void* cuda_stream) override {
    allreduce(device_data, n, ncclFloat64, "double", cuda_stream);
  }
  void broadcast_device(void* device_data, std::size_t bytes, int root,
                        void* cuda_stream) override {
    if (root < 0 || root >= size())
      throw InvalidArgument(fmt::format("broadcast_device: root {} is not a rank of {} (0 to {})",
                                        root, name(), size() - 1));
    if (bytes == 0) return;
    const auto call = [&] {
      return fmt::format("ncclBroadcast({} bytes from rank {})", bytes, root);
    };
    const CurrentDevice current(device_);
    enter(current, call);
    auto stream = static_cast<cudaStream_t>(cuda_stream);
    check(nccl_->broadcast(device_data, device_data, bytes, ncclUint8, root, comm_, stream), call);
    wait(&stream, call);
  }

  [[noreturn]] void abort(int code, const std::string& message) override {
    if (comm_ != nullptr) nccl_->comm_abort(std::exchange(comm_, nullptr));
    host_->abort(code, message);
    std::_Exit(code);  // not reached: the attribute does not carry through the virtual call
  }

 private:
  template <typename T>
  void allreduce(T* data, std::size_t n, ncclDataType_t type, const char* type_name,
                 void* cuda_stream) {
    if (n == 0) return;
    const auto call = [&] { return fmt::format("ncclAllReduce({} {} values)", n, type_name); };
    const CurrentDevice current(device_);
    enter(current, call);
    auto stream = static_cast<cudaStream_t>(cuda_stream);
    check(nccl_->all_reduce(data, data, n, type, ncclSum, comm_, stream), call);
    wait(&stream, call);
  }

  // Before a collective: the communicator is still usable and this rank's device is current.
  template <typename Call>
  void enter(const CurrentDevice& current, const Call& call) {
    if (comm_ == nullptr)
      throw Error(fmt::format("{} on {}: the NCCL communicator was aborted after an earlier error",
                              call(), name()));
    if (current.status() != cudaSuccess)
      fail(fmt::format("{}: cudaSetDevice({}) failed: {}", call(), device_,
                       describe(current.status())));
  }

  // A call on the non-blocking communicator either completes, returns ncclInProgress (then
  // wait() finishes it) or fails.
  void check(ncclResult_t result, const char* call) {
    check(result, [call] { return std::string(call); });
  }
  template <typename Call>
  void check(ncclResult_t result, const Call& call) {
    if (result != ncclSuccess && result != ncclInProgress)
      fail(fmt::format("{} failed: {}", call(), describe(*nccl_, result, comm_)));
  }

  // Waits until NCCL's pending call and, when `stream` is given, the work on it are done.
  void wait(const cudaStream_t* stream, const char* call) {
    wait(stream, [call] { return std::string(call); });
  }
  template <typename Call>
  void wait(const cudaStream_t* stream, const Call& call) {
    if (std::string failure = poll(stream); !failure.empty())
      fail(fmt::format("{} {}", call(), failure));
  }

  // Polls ncclCommGetAsyncError (and cudaStreamQuery) until done, an error or the timeout.
  // Returns what went wrong ("failed: ..." or "did not complete ..."), empty when done.
  std::string poll(const cudaStream_t* stream) {
    const auto start = Clock::now();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (const ncclResult_t r = nccl_->comm_get_async_error(comm_, &state); r != ncclSuccess)
        return fmt::format("failed: ncclCommGetAsyncError: {}", describe(*nccl_, r, comm_));
      if (state != ncclSuccess && state != ncclInProgress)
        return fmt::format("failed: {}", describe(*nccl_, state, comm_));
      if (state == ncclSuccess) {
        if (stream == nullptr) return {};
        const cudaError_t ready = cudaStreamQuery(*stream);
        if (ready == cudaSuccess) return {};
        if (ready != cudaErrorNotReady)
          return fmt::format("failed: cudaStreamQuery: {}", describe(ready));
        // "Not ready" is recorded as this thread's last error; left there, the next kernel
        // launch's cudaGetLastError() check would report it as a launch failure.
        (void)cudaGetLastError();
      }
      const auto waited = Clock::now() - start;
      if (std::chrono::duration<double>(waited).count() > timeout_)
        return fmt::format(
            "did not complete within {} s (a peer rank may have died or stopped calling the same "
            "collectives); set LMTRAIN_NCCL_TIMEOUT_S to wait longer",
            timeout_);
      // Spin briefly for short collectives, then stop burning the core the rank's host work uses.
      if (waited < std::chrono::milliseconds(10))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // Ends this rank's part in NCCL, then the job: an error on one rank must not leave the others
  // waiting.  With one rank nothing else waits, and the error is thrown instead.
  [[noreturn]] void fail(const std::string& what) {
    if (comm_ != nullptr) nccl_->comm_abort(std::exchange(comm_, nullptr));
    const std::string where = fmt::format("rank {} of {}", rank(), size());
    const std::string failure = fmt::format("NCCL on CUDA device {}: {}", device_, what);
    if (size() == 1) throw BackendError(fmt::format("{}: {}", where, failure));
    host_->abort(kFailureExitCode, fmt::format("lmtrain: {}: error: {}", where, failure));
    std::_Exit(kFailureExitCode);  // not reached (see abort)
  }

  Communicator* host_;  // the communicator this one decorates (ForwardingCommunicator's)
  int device_;
  double timeout_;
  const NcclLibrary* nccl_ = nullptr;  // set before comm_ (the constructor fails without it)
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_built() noexcept {
  return true;
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     int cuda_device) {
  if (host == nullptr)
    throw InvalidArgument(
        "make_nccl_communicator: the host communicator is null; pass "
        "make_communicator_from_environment() or make_local_communicator()");
  return std::make_unique<NcclCommunicator>(std::move(host), cuda_device);
}

}  // namespace lmtrain::dist
