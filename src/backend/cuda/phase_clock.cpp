#include "phase_clock.h"

#include <vector>

#include "cuda_check.h"

namespace lmtrain::cuda {
namespace {

class EventPhaseClock final : public PhaseClock {
 public:
  explicit EventPhaseClock(cudaStream_t stream) : stream_(stream) {}
  ~EventPhaseClock() override {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
    for (const Mark& m : marks_) {
      (void)cudaEventDestroy(m.begin);
      (void)cudaEventDestroy(m.end);
    }
  }
  EventPhaseClock(const EventPhaseClock&) = delete;
  EventPhaseClock& operator=(const EventPhaseClock&) = delete;

  void begin(Phase phase) override {
    open_ = {phase, take(), nullptr};
    CUDA_CHECK(cudaEventRecord(open_.begin, stream_));
  }
  void end(Phase phase) override {
    if (open_.begin == nullptr || open_.phase != phase) return;  // an end without its begin
    open_.end = take();
    CUDA_CHECK(cudaEventRecord(open_.end, stream_));
    marks_.push_back(open_);
    open_ = {};
  }
  void collect(PhaseTimes& times) override {
    for (const Mark& m : marks_) {
      CUDA_CHECK(cudaEventSynchronize(m.end));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, m.begin, m.end));
      times[m.phase] += 1e-3 * static_cast<double>(ms);
      free_.push_back(m.begin);
      free_.push_back(m.end);
    }
    marks_.clear();
  }

 private:
  struct Mark {
    Phase phase = Phase::kOther;
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
  };
  cudaEvent_t take() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }

  cudaStream_t stream_;
  Mark open_;
  std::vector<Mark> marks_;
  std::vector<cudaEvent_t> free_;
};

}  // namespace

std::unique_ptr<PhaseClock> make_event_phase_clock(cudaStream_t stream) {
  return std::make_unique<EventPhaseClock>(stream);
}

void order_after(cudaStream_t stream, cudaStream_t other) {
  if (stream == other || other == nullptr) return;
  // One event per call, destroyed at once: cudaStreamWaitEvent captures the event's state when
  // called, so destroying it afterwards is allowed and frees it when the wait completes.
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(e, other));
  CUDA_CHECK(cudaStreamWaitEvent(stream, e, 0));
  CUDA_CHECK(cudaEventDestroy(e));
}

}  // namespace lmtrain::cuda
