// The CPU backend's thread counts (include/lmtrain/backend/cpu_threads.h): what the environment
// allows, a choice per phase of the LM step measured from the phase's own durations, and the
// guard around every BLAS/LAPACK call.
//
// Why measured: OpenMP regions and OpenBLAS's threaded calls end at barriers that wait for every
// thread.  When another process keeps a core busy, each barrier can wait for a thread the
// scheduler has not run yet, and W2c (1-256-1 tanh, batches of 10 000) ran 1.85–2.3× slower on
// the default two threads than on one, while on a quiet machine two threads are faster.  No rule
// of thumb tells the two apart; the phase's own time on each thread count does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/timer.h"

namespace lmtrain::cpu {

// OpenBLAS threads a GEMM/SYRK/potrf from a few hundred thousand flops on.  Its threads meet at
// barriers, and when another process holds one of the cores each barrier can wait a scheduler
// time slice: on a loaded 2-core machine W1's 61×61×1000 SYRK took 10 ms instead of 0.1 ms and
// kin32fm's n = 545 Cholesky 500 ms instead of 6 ms.  Below this many multiply-adds (about
// 0.1 s on one core) a call runs on one thread, where the most a second thread could have saved
// is small.
constexpr double kSerialBlasWork = 1 << 28;

// What the process may use, read once from the OpenMP runtime and the environment.
struct ThreadEnvironment {
  int cores = 1;                         // processors this process may run on (its affinity mask)
  int threads = 1;                       // the most lmtrain runs on
  bool fixed = false;                    // the user chose the count: every phase runs on `threads`
  std::string source;                    // where `threads` comes from, e.g. "OMP_NUM_THREADS = 1"
  std::vector<std::string> neutralized;  // OpenMP settings overridden, and why
  std::string wait_policy;               // how idle OpenMP threads wait
};
// The process's environment, with set_cpu_threads applied.
ThreadEnvironment thread_environment();

// Chooses a thread count ("arm") for one phase from the phase's measured durations on each.
//
// A phase's occurrences are not all alike: an eigen solver's first attempt runs syevd (n³), its
// retries only O(n²).  Occurrences are therefore told apart by the BLAS work they did (a factor
// of 4 apart, from kSerialBlasWork on), and an arm's expected duration is Σ_k P(k)·median(arm, k)
// over the kinds k of occurrence every arm has run, P(k) the kind's share of all occurrences —
// so arms are compared on the same mixture whichever occurrences each happened to get.
//
// The phase's very first occurrence, which also pays for page faults and starting threads, runs
// on one thread and is not counted; then every arm runs kWarmup times — an arm that the other
// phases have measured more than 1 + kExploreCost times slower only on an exploring share, as
// below: on a loaded machine two threads can take ten times as long, and a first look at every
// phase on them cost more than the whole choice saved — then the fastest does —
// an arm with more threads only when it is kMargin faster than one with fewer, since under
// contention a team of threads is the arm that can lose by far — and another is tried on a share
// of the occurrences that shrinks as it falls behind: kExploreShare while it is at most
// 1 + kExploreCost times slower, so that exploring never costs more than about
// kExploreShare·kExploreCost (3 %) of the phase's time, and a co-tenant who comes or goes is still
// noticed.  The occurrences that explore follow a Weyl sequence (i·φ mod 1), which no periodic
// pattern of the work (6 slices per batch, alternating kinds) can line up with.
class ThreadTuner {
 public:
  static constexpr std::size_t kSamples = 5;  // the last durations kept per arm and kind
  static constexpr std::size_t kKinds = 8;
  static constexpr std::size_t kWarmup = 1;
  static constexpr double kMargin = 0.1;
  static constexpr double kExploreShare = 0.125;
  static constexpr double kExploreCost = 0.25;

  // arms[0] is the most threads.
  explicit ThreadTuner(std::vector<int> arms);
  // `prior`: per arm, how many times slower than the best arm the other phases found it (empty:
  // not known).
  std::size_t choose(const std::vector<double>& prior = {});
  // One occurrence on `arm` that did `blas_work` multiply-adds of BLAS calls.
  void record(std::size_t arm, double blas_work, double seconds);
  // The arm with the lowest expected duration, with kMargin for more threads (the last arm, one
  // thread, while none can be compared).
  std::size_t best() const;
  // The expected duration of an occurrence on the arm (see above); NaN while there is none.
  double expected(std::size_t arm) const;
  // Per arm, expected(arm) / the best arm's; empty while the arms cannot be compared.
  std::vector<double> slowdowns() const;
  std::size_t arm_count() const { return arms_.size(); }
  int threads(std::size_t arm) const { return arms_[arm].threads; }
  static std::size_t kind_of(double blas_work);

 private:
  struct Durations {
    std::array<double, kSamples> recent{};
    std::size_t count = 0;  // recorded (recent holds the last kSamples)
    double median() const;
  };
  struct Arm {
    int threads = 1;
    std::array<Durations, kKinds> kinds{};
    std::size_t samples = 0;
  };
  std::vector<Arm> arms_;
  std::array<std::uint64_t, kKinds> kind_counts_{};
  std::uint64_t occurrences_ = 0;
  std::size_t next_explored_ = 0;  // round-robin over the arms that are not the best
  bool first_ = true;              // the next record() is the cold first occurrence
};

// Thread use of one backend and its mixed-precision sibling (one fit): the arm of each phase
// occurrence, and BLAS calls run on one thread because they are small.  Phase boundaries come
// from the backend's PhaseClock, on the thread that trains.  Parts of one phase that follow each
// other with no other phase between them (the factorization's prepare and solve, geodesic
// acceleration's forward passes and its solve) are one occurrence.
//
// A phase's count is set on the thread that runs it when the phase begins, and the thread's own
// count and OMP_DYNAMIC come back when it ends: the caller's OpenMP code outside lmtrain keeps
// its settings, which matters because the runtime can be shared — PyTorch's wheel ships its own
// libgomp.so.1, and the loader gives lmtrain's extension that same library when torch was
// imported first, so a count left behind would change torch's own thread count (and its sums).
class ThreadController {
 public:
  ThreadController();

  // The count lmtrain sizes its work for (slices, scratch): the most it runs on.
  int max_threads() const { return env_.threads; }
  void begin(Phase phase);
  void end(Phase phase, double seconds);
  // A BLAS/LAPACK call of `work` multiply-adds, run on one thread when `serial`.
  void count_call(double work, bool serial);
  // The Summary's lines: the environment, then one line per phase that ran.
  std::string report() const;

 private:
  static constexpr std::size_t kPhases = static_cast<std::size_t>(Phase::kCount);
  static constexpr std::size_t kNone = kPhases;
  void apply(int threads) const;
  void flush();
  std::string phase_line(std::size_t phase) const;
  std::vector<double> prior_for(std::size_t phase) const;

  ThreadEnvironment env_;
  mutable std::mutex mutex_;
  std::vector<ThreadTuner> tuners_;                                  // one per phase
  std::array<std::array<std::uint64_t, 4>, kPhases> occurrences_{};  // per phase and arm
  std::array<std::uint64_t, kPhases> serial_calls_{};                // small BLAS calls
  int depth_ = 0;  // phases open (a phase inside a phase is part of the outer one)
  // The occurrence open or last ended (kNone: none to record).
  std::size_t phase_ = kNone;
  bool open_ = false;
  std::size_t arm_ = 0;
  double seconds_ = 0, blas_work_ = 0;
  int caller_threads_ = 1;  // the running thread's OpenMP count before the open phase
  bool caller_dynamic_ = false;
};

// Scope of one BLAS/LAPACK call: neutralizes OMP_DYNAMIC and an OpenMP thread count above the
// environment's for the calling thread (OpenBLAS runs `num` threads in one OpenMP region and
// each waits for the others, so a region the runtime gives fewer threads never ends), and runs
// calls below kSerialBlasWork on one thread, restoring the count afterwards.
class BlasCall {
 public:
  BlasCall(ThreadController& threads, double work);
  BlasCall(const BlasCall&) = delete;
  BlasCall& operator=(const BlasCall&) = delete;
  ~BlasCall();

 private:
  int restore_ = 0;  // the thread count to set back (0: unchanged)
};

// The host clock (HostPhaseClock's accounting) that also tells a ThreadController where each
// phase begins and ends, so the phase runs on the count chosen for it.
class ThreadedPhaseClock final : public PhaseClock {
 public:
  explicit ThreadedPhaseClock(std::shared_ptr<ThreadController> threads)
      : threads_(std::move(threads)) {}
  void begin(Phase phase) override {
    threads_->begin(phase);
    start_ = Clock::now();
  }
  void end(Phase phase) override {
    const double seconds = seconds_since(start_);
    pending_[phase] += seconds;
    threads_->end(phase, seconds);
  }
  void collect(PhaseTimes& times) override {
    for (std::size_t p = 0; p < pending_.seconds.size(); ++p)
      times.seconds[p] += pending_.seconds[p];
    pending_ = PhaseTimes{};
  }

 private:
  std::shared_ptr<ThreadController> threads_;
  Clock::time_point start_ = Clock::now();
  PhaseTimes pending_;
};

// A CPU backend of precision S whose threads are chosen and counted with `device`'s when it is
// a CPU backend (mixed precision's float64 side; make_sibling_backend).
template <typename S>
std::unique_ptr<Backend<S>> make_cpu_sibling(const DeviceQueue& device);

}  // namespace lmtrain::cpu
