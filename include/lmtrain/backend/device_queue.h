// The device and its queue, the part of a backend every layer above it sees (DESIGN.md §2): what
// the device is, its memory, how its work is ordered and timed.  LinearAlgebra (dense algebra on
// it) and Backend (neural-network kernels on top) extend it; a communicator, the memory planner
// and the phase clocks need only this.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmtrain/core/buffer.h"
#include "lmtrain/core/timer.h"

namespace lmtrain {

enum class DeviceKind { kCpu, kCuda };

// How a device likes each batch's Jacobian sliced (the memory plan's slice): about `bytes` of
// working set per slice (Jacobian rows, activations) with at least `min_rows` Jacobian rows;
// bytes = 0 asks for the largest slice the memory budget allows.
struct SlicePreference {
  std::size_t bytes = 0;
  std::size_t min_rows = 1;
  // Stride of a slice's rows (≥ n; 0: n), its extra columns held at zero.
  std::size_t leading_dimension = 0;
  // How the padding reaches SYRK.  true: as extra zero columns of J — A is summed ld × ld and its
  // n × n corner copied to the normal matrix (OpenBLAS's float SYRK on a few dozen columns runs
  // faster on a multiple of its kernel's width).  false: as the row stride only — SYRK and GEMM
  // read n columns of rows that start aligned, and A is n × n (the CUDA backend).  A widened
  // float64 slice (mixed precision) takes the stride only.
  bool syrk_on_padding = true;
  // Mixed precision (float32 J, float64 A): rows of a slice widened to float64 at a time, each
  // block's SYRK and GEMV before the next is widened (0: the whole slice at once).  Where slices
  // are large (a GPU's, with no preferred size), the widened copy is then a block, not twice the
  // slice's bytes; a CPU's slices are cache-sized already.  A distributed A takes whole slices.
  std::size_t widening_rows = 0;
  // Where it is above 0 and below widening_rows: the block is chosen by measurement at the
  // builder's first slice among widening_rows_smallest, 4×, 16×, … and widening_rows itself
  // (each at most the slice's rows), the one that widens and sums a slice fastest; the plan
  // reserves widening_rows.  0: widening_rows, unmeasured.
  std::size_t widening_rows_smallest = 0;
};

// Work queued once and queued again as a whole (a CUDA graph): the same kernels and library
// calls with the same arguments — the pointers, sizes and host scalars they had when recorded;
// what the buffers hold is read when the replay runs.
class QueueRecording {
 public:
  virtual ~QueueRecording() = default;
  // Queues the recorded work on the queue it was recorded from.  The buffers it uses must still
  // be allocated, and the recording must not outlive its backend.
  virtual void replay() = 0;
  // False once the backend has moved memory the recorded work uses itself (a library workspace
  // that grew since): replay() would then reach freed memory — record again.
  virtual bool valid() const { return true; }
};

// A buffer's address as part of the key a recording is replayed under (solve/recorded_work.h,
// LinearizationSource::evaluation_key): the same key, the same buffers its calls were given.
inline std::uintptr_t address_key(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;

  // Human-readable device description, e.g. "cpu (OpenBLAS 0.3.21, 2 threads)".
  virtual std::string name() const = 0;
  virtual DeviceKind device_kind() const = 0;
  virtual MemoryResource& memory() = 0;
  // Bytes the memory planner may consider free on this device right now.
  virtual std::size_t available_memory_bytes() const = 0;
  // The slicing this device runs fastest, for a step of `num_params` parameters.
  virtual SlicePreference slice_preference(std::size_t /*num_params*/) const { return {}; }
  // Blocks until all queued work is done (a no-op on the CPU); called before timers close.
  virtual void synchronize() = 0;
  // Index of the device among the visible ones of its kind (0 for the CPU).
  virtual int device_index() const { return 0; }
  // The queue the backend's work runs on (a cudaStream_t for CUDA; null for the CPU), for
  // communicators that enqueue collectives on device buffers.
  virtual void* native_stream() { return nullptr; }
  // Work queued on this queue from now on starts only after everything queued so far on
  // `other_queue` (another backend's native_stream() on the same device) — ordered on the device,
  // without a host wait.  A no-op on the CPU, where every call has finished when it returns.
  virtual void order_after(void* /*other_queue*/) {}
  // Records what `work` queues on this queue, without running it, for QueueRecording::replay
  // (issue 36: an LM attempt launched as one graph).  Returns null, with the reason in `why`,
  // where the queue cannot record — the CPU, which runs work as it is queued (`work` is not
  // called); a borrowed legacy default stream — or where `work` did what a recording cannot hold:
  // a host read or wait, an allocation or free, a library call that refuses capture.  Nothing
  // `work` queued has run then; the caller queues it again unrecorded.
  virtual std::unique_ptr<QueueRecording> record(const std::function<void()>& /*work*/,
                                                 std::string& why) {
    why = name() + " runs work as it is queued: nothing to record";
    return nullptr;
  }
  // Why record() refuses any work on this queue, known before anything is queued (the CPU: it
  // runs work as it is queued); empty where record() may succeed.  A caller that would keep
  // buffers for a recording asks this first.
  virtual std::string why_not_recordable() const { return "the CPU runs work as it is queued"; }
  // How the device's host threads were used and why, for the Summary (the CPU: the thread count
  // of each phase, chosen per phase; cpu_threads.h).  Empty where there is no such choice.
  virtual std::string thread_report() const { return {}; }
  // A clock for phases of this queue's queue (core/timer.h); the host clock on the CPU.
  virtual std::unique_ptr<PhaseClock> make_phase_clock() {
    return std::make_unique<HostPhaseClock>();
  }

  // Device→host reads so far: every call of LinearAlgebra or Backend that returns device data to
  // the host (a reduction's scalar, a factorization's status, copy_to_host, read_scalars) counts
  // one.  On a GPU each is a stream synchronization, the host idle until the queue drains; the
  // calls count themselves (linear_algebra.h), so the CPU backend, where a read costs nothing,
  // counts what a GPU would wait for, and CI checks the LM step's reads without one.
  std::uint64_t host_reads() const { return host_reads_; }

 protected:
  void count_host_read() { ++host_reads_; }

 private:
  std::uint64_t host_reads_ = 0;
};

// Seconds `op` takes on `clock` (one of `queue`'s: the device's own clock on a GPU), the queue
// drained after it.
inline double queue_seconds(DeviceQueue& queue, PhaseClock& clock,
                            const std::function<void()>& op) {
  PhaseTimes times;
  clock.begin(Phase::kOther);
  op();
  clock.end(Phase::kOther);
  queue.synchronize();
  clock.collect(times);
  return times[Phase::kOther];
}

// How a backend chooses between ways of doing one thing by measurement (SyrkChoice's SYRK
// against split-K, the mixed-precision widening block): run(w) queues way w; each is run once to
// warm up (kernels loaded, a library's first-call choices made), then `repeats` rounds run every
// way once in turn, so that a drifting clock or a co-tenant weighs on all alike.  The median
// seconds of each way.
inline std::vector<double> median_queue_seconds(DeviceQueue& queue, std::size_t ways, int repeats,
                                                const std::function<void(std::size_t)>& run) {
  for (std::size_t w = 0; w < ways; ++w) run(w);
  const std::unique_ptr<PhaseClock> clock = queue.make_phase_clock();
  std::vector<std::vector<double>> samples(ways);
  for (int r = 0; r < repeats; ++r)
    for (std::size_t w = 0; w < ways; ++w)
      samples[w].push_back(queue_seconds(queue, *clock, [&] { run(w); }));
  std::vector<double> medians;
  for (std::vector<double>& s : samples) {
    std::sort(s.begin(), s.end());
    medians.push_back(s.empty() ? 0.0 : s[s.size() / 2]);
  }
  return medians;
}

}  // namespace lmtrain
