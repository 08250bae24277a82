#include "cpu_threads.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "lmtrain/backend/cpu_threads.h"

namespace lmtrain {
namespace {

// Written before main (prefer_passive_openmp_wait runs from .preinit_array, before any C++
// initializer): constant-initialized, so no initializer overwrites it later.
constinit std::atomic<bool> g_passive_by_lmtrain{false};
constinit std::atomic<int> g_requested_threads{0};

}  // namespace

void set_cpu_threads(int threads) {
  g_requested_threads.store(std::max(0, threads));
}

bool prefer_passive_openmp_wait() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
    return false;
  if (setenv("OMP_WAIT_POLICY", "passive", 0) != 0) return false;
  g_passive_by_lmtrain.store(true);
  return true;
}

void note_passive_openmp_wait_set_by_lmtrain() {
  g_passive_by_lmtrain.store(true);
}

namespace cpu {
namespace {

// The first count of an OpenMP-style list ("4" or "4,2"); 0 when unset or not a count.
int leading_count(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || v < 1) return 0;
  return static_cast<int>(std::min<long>(v, 1 << 16));
}

std::string wait_policy_text() {
  if (g_passive_by_lmtrain.load())
    return "passive (OMP_WAIT_POLICY set by lmtrain: idle threads sleep instead of spinning on "
           "cores other processes need)";
  if (const char* policy = std::getenv("OMP_WAIT_POLICY"))
    return fmt::format("{} (OMP_WAIT_POLICY)", policy);
  if (const char* spins = std::getenv("GOMP_SPINCOUNT"))
    return fmt::format("spin {} times, then sleep (GOMP_SPINCOUNT)", spins);
  return "the OpenMP runtime's default (idle threads spin a while before they sleep; "
         "OMP_WAIT_POLICY=passive before start-up avoids it)";
}

// The process's facts, read once: the first CPU backend reads them before lmtrain changes any
// OpenMP setting of its thread.
struct ProcessThreads {
  int cores = 1;
  int cap = 1;  // the most threads OpenMP can run here
  std::vector<std::string> neutralized;
  int asked = 0;  // the user's count from the environment (0: none)
  std::string asked_source;
};

ProcessThreads read_process_threads() {
  ProcessThreads p;
  p.cores = std::max(1, omp_get_num_procs());
  p.cap = p.cores;
  if (const int limit = omp_get_thread_limit(); limit < p.cap) {
    p.cap = std::max(1, limit);
    p.neutralized.push_back(fmt::format(
        "OMP_THREAD_LIMIT = {}: at most {} thread(s) (OpenBLAS would wait forever for threads "
        "beyond it)",
        limit, p.cap));
  }
  if (omp_get_max_active_levels() < 1) {
    p.cap = 1;
    p.neutralized.push_back(
        "OMP_MAX_ACTIVE_LEVELS = 0 allows no parallel region: one thread (OpenBLAS would wait "
        "forever for threads the runtime never starts)");
  }
  if (omp_get_dynamic())
    p.neutralized.push_back(
        "OMP_DYNAMIC = true: turned off for lmtrain's calls (OpenBLAS's threads wait for one "
        "another, and a team the runtime shrinks never finishes)");
  const int omp = leading_count("OMP_NUM_THREADS");
  int blas = leading_count("OPENBLAS_NUM_THREADS");
  const char* blas_name = "OPENBLAS_NUM_THREADS";
  if (blas == 0) {
    blas = leading_count("GOTO_NUM_THREADS");
    blas_name = "GOTO_NUM_THREADS";
  }
  // OpenBLAS's OpenMP build runs on the caller's OpenMP thread count, so one count serves both;
  // with both set, the smaller one is what the user allows.
  if (omp > 0 && (blas == 0 || omp <= blas)) {
    p.asked = omp;
    p.asked_source = fmt::format("OMP_NUM_THREADS = {}", omp);
  } else if (blas > 0) {
    p.asked = blas;
    p.asked_source = fmt::format("{} = {}", blas_name, blas);
  }
  if (p.asked > p.cores)
    p.neutralized.push_back(fmt::format(
        "{} is more than the {} processor(s) this process may use: {} (threads beyond the cores "
        "only wait for one another)",
        p.asked_source, p.cores, std::min(p.asked, p.cap)));
  return p;
}

const ProcessThreads& process_threads() {
  static const ProcessThreads p = read_process_threads();
  return p;
}

std::string thread_word(int n) {
  return n == 1 ? "1 thread" : fmt::format("{} threads", n);
}

std::string milliseconds(double seconds) {
  return std::isnan(seconds) ? std::string("–") : fmt::format("{:.3g} ms", 1e3 * seconds);
}

}  // namespace

ThreadEnvironment thread_environment() {
  const ProcessThreads& p = process_threads();
  ThreadEnvironment e;
  e.cores = p.cores;
  e.neutralized = p.neutralized;
  e.wait_policy = wait_policy_text();
  if (const int requested = g_requested_threads.load(); requested > 0) {
    e.threads = std::min(requested, p.cap);
    e.fixed = true;
    e.source = fmt::format("set_cpu_threads({})", requested);
  } else if (p.asked > 0) {
    e.threads = std::min(p.asked, p.cap);
    e.fixed = true;
    e.source = p.asked_source;
  } else {
    e.threads = p.cap;
    e.source = fmt::format("{} processor(s), OMP_NUM_THREADS unset", p.cores);
  }
  if (e.threads == 1) e.fixed = true;  // nothing to choose
  return e;
}

ThreadTuner::ThreadTuner(std::vector<int> arms) {
  for (int t : arms) arms_.push_back(Arm{t, {}, 0});
}

std::size_t ThreadTuner::kind_of(double blas_work) {
  if (blas_work < kSerialBlasWork) return 0;
  const auto quarter_steps = static_cast<std::size_t>(std::log2(blas_work / kSerialBlasWork) / 2);
  return std::min(kKinds - 1, 1 + quarter_steps);
}

double ThreadTuner::Durations::median() const {
  const std::size_t n = std::min(count, kSamples);
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  // An insertion sort of at most kSamples values, not std::sort: GCC 12's -Warray-bounds misreads
  // std::sort's insertion threshold (16) against a 5-element array under -fsanitize=address, and
  // a vector would allocate once per phase per step.
  std::array<double, kSamples> v = recent;
  for (std::size_t i = 1; i < n; ++i)
    for (std::size_t k = i; k > 0 && v[k] < v[k - 1]; --k) std::swap(v[k], v[k - 1]);
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ThreadTuner::expected(std::size_t arm) const {
  double weighted = 0, weight = 0;
  for (std::size_t k = 0; k < kKinds; ++k) {
    bool everywhere = kind_counts_[k] > 0;
    for (const Arm& a : arms_) everywhere = everywhere && a.kinds[k].count > 0;
    if (!everywhere) continue;
    const auto w = static_cast<double>(kind_counts_[k]);
    weighted += w * arms_[arm].kinds[k].median();
    weight += w;
  }
  return weight > 0 ? weighted / weight : std::numeric_limits<double>::quiet_NaN();
}

std::size_t ThreadTuner::best() const {
  // From the fewest threads up: more threads must be kMargin faster to be chosen.
  std::size_t b = arms_.size() - 1;
  double fastest = expected(b);
  if (std::isnan(fastest)) return b;
  for (std::size_t a = arms_.size() - 1; a-- > 0;) {
    const double e = expected(a);
    if (e < (1 - kMargin) * fastest) {
      fastest = e;
      b = a;
    }
  }
  return b;
}

std::vector<double> ThreadTuner::slowdowns() const {
  const double fastest = expected(best());
  if (std::isnan(fastest) || !(fastest > 0)) return {};
  std::vector<double> r;
  for (std::size_t a = 0; a < arms_.size(); ++a) r.push_back(expected(a) / fastest);
  return r;
}

std::size_t ThreadTuner::choose(const std::vector<double>& prior) {
  ++occurrences_;
  if (first_ || arms_.size() == 1) return arms_.size() - 1;
  const double u = std::fmod(static_cast<double>(occurrences_) * 0.6180339887498949, 1.0);
  // The share of occurrences an arm `behind` times slower than the best is tried on.
  auto share = [](double behind) {
    return kExploreShare * std::min(1.0, kExploreCost / std::max(behind - 1, 1e-9));
  };
  bool warming = false;
  for (const Arm& a : arms_) warming = warming || a.samples < kWarmup;
  const std::size_t b = best();
  if (warming || std::isnan(expected(b))) {
    // Arms drawn by the Weyl sequence rather than in turn: work that alternates between two
    // kinds would otherwise give each arm one kind only, and no kind would ever be compared.
    const auto drawn =
        std::min(arms_.size() - 1, static_cast<std::size_t>(u * static_cast<double>(arms_.size())));
    if (prior.size() != arms_.size() || !(prior[drawn] > 1 + kExploreCost)) return drawn;
    // An arm the other phases found far slower: only on its exploring share (a second Weyl
    // sequence, independent of the first); else the arm they found fastest.
    const double v = std::fmod(static_cast<double>(occurrences_) * 0.4142135623730951, 1.0);
    if (v < share(prior[drawn])) return drawn;
    return static_cast<std::size_t>(std::min_element(prior.begin(), prior.end()) - prior.begin());
  }
  // The next arm after the last one explored that is not the best, on its share.
  std::size_t candidate = next_explored_ % arms_.size();
  if (candidate == b) candidate = (candidate + 1) % arms_.size();
  if (u >= share(expected(candidate) / expected(b))) return b;
  next_explored_ = candidate + 1;
  return candidate;
}

void ThreadTuner::record(std::size_t arm, double blas_work, double seconds) {
  if (first_) {
    first_ = false;
    return;
  }
  const std::size_t k = kind_of(blas_work);
  Durations& d = arms_[arm].kinds[k];
  d.recent[d.count % kSamples] = seconds;
  ++d.count;
  ++arms_[arm].samples;
  ++kind_counts_[k];
}

ThreadController::ThreadController() : env_(thread_environment()) {
  // The arms: all threads, half of them on larger machines, one.
  std::vector<int> arms{env_.threads};
  if (!env_.fixed) {
    if (env_.threads >= 4) arms.push_back((env_.threads + 1) / 2);
    arms.push_back(1);
  }
  tuners_.assign(kPhases, ThreadTuner(arms));
}

std::vector<double> ThreadController::prior_for(std::size_t phase) const {
  // Per arm, the geometric mean over the other phases that can compare their arms of its
  // slowdown (a ratio: 4× slower in one phase and 0.25× in another average to 1×).
  std::vector<double> log_sum(tuners_[phase].arm_count(), 0.0);
  int phases = 0;
  for (std::size_t q = 0; q < kPhases; ++q) {
    const std::vector<double> r = q == phase ? std::vector<double>{} : tuners_[q].slowdowns();
    if (r.size() != log_sum.size()) continue;
    for (std::size_t a = 0; a < r.size(); ++a) log_sum[a] += std::log(r[a]);
    ++phases;
  }
  if (phases == 0) return {};
  std::vector<double> prior;
  for (double l : log_sum) prior.push_back(std::exp(l / phases));
  return prior;
}

void ThreadController::apply(int threads) const {
  if (omp_get_dynamic()) omp_set_dynamic(0);
  // OpenBLAS's OpenMP build runs a call on the caller's OpenMP thread count (and sets it).
  if (omp_get_max_threads() != threads) openblas_set_num_threads(threads);
}

void ThreadController::flush() {
  if (phase_ != kNone) tuners_[phase_].record(arm_, blas_work_, seconds_);
  phase_ = kNone;
}

void ThreadController::begin(Phase phase) {
  const std::lock_guard lock(mutex_);
  if (depth_++ > 0) return;
  const auto p = static_cast<std::size_t>(phase);
  if (p != phase_) {  // a new occurrence (else the last one goes on)
    flush();
    phase_ = p;
    arm_ = tuners_[p].choose(prior_for(p));
    seconds_ = blas_work_ = 0;
    ++occurrences_[p][arm_];
  }
  open_ = true;
  caller_threads_ = omp_get_max_threads();
  caller_dynamic_ = omp_get_dynamic() != 0;
  apply(tuners_[p].threads(arm_));
}

void ThreadController::end(Phase phase, double seconds) {
  const std::lock_guard lock(mutex_);
  if (depth_ == 0 || --depth_ > 0) return;
  if (static_cast<std::size_t>(phase) == phase_) seconds_ += seconds;
  open_ = false;
  if (omp_get_max_threads() != caller_threads_) openblas_set_num_threads(caller_threads_);
  if (caller_dynamic_) omp_set_dynamic(1);
}

void ThreadController::count_call(double work, bool serial) {
  const std::lock_guard lock(mutex_);
  if (open_) blas_work_ += work;
  if (serial) ++serial_calls_[open_ ? phase_ : static_cast<std::size_t>(Phase::kOther)];
}

std::string ThreadController::phase_line(std::size_t p) const {
  const ThreadTuner& tuner = tuners_[p];
  std::uint64_t total = 0;
  for (std::size_t a = 0; a < tuner.arm_count(); ++a) total += occurrences_[p][a];
  std::string uses, measured, untried;
  std::vector<double> prior;
  for (std::size_t a = 0; a < tuner.arm_count(); ++a) {
    if (occurrences_[p][a] > 0)
      uses += fmt::format("{}{} on {}", uses.empty() ? "" : ", ", occurrences_[p][a],
                          thread_word(tuner.threads(a)));
    if (const double e = tuner.expected(a); !std::isnan(e)) {
      measured += fmt::format("{}{} on {}", measured.empty() ? "" : ", ", milliseconds(e),
                              tuner.threads(a));
    } else if (occurrences_[p][a] == 0) {
      if (prior.empty()) prior = prior_for(p);
      untried += fmt::format("; not tried on {}{}", thread_word(tuner.threads(a)),
                             prior.empty() ? std::string()
                                           : fmt::format(" (the other phases found them {:.1f}× "
                                                         "slower)",
                                                         prior[a]));
    }
  }
  std::string line = fmt::format("{} times: {}", total, uses);
  if (!measured.empty()) line += "; measured " + measured;
  line += untried;
  if (tuner.arm_count() > 1) line += fmt::format(" → {}", thread_word(tuner.threads(tuner.best())));
  if (serial_calls_[p] > 0)
    line += fmt::format("; {} BLAS call(s) below 2^28 multiply-adds on 1 thread", serial_calls_[p]);
  return line;
}

std::string ThreadController::report() const {
  const std::lock_guard lock(mutex_);
  std::string s = fmt::format("{:<34}up to {} ({}{})\n", "Threads", env_.threads, env_.source,
                              env_.fixed ? "" : "; chosen per phase by its measured time");
  s += fmt::format("{:<34}{}\n", "  OpenMP wait policy", env_.wait_policy);
  for (const std::string& n : env_.neutralized) s += fmt::format("{:<34}{}\n", "  neutralized", n);
  for (std::size_t p = 0; p < kPhases; ++p) {
    std::uint64_t total = 0;
    for (std::uint64_t c : occurrences_[p]) total += c;
    if (total == 0) continue;
    s += fmt::format("  {:<32}{}\n", phase_name(static_cast<Phase>(p)), phase_line(p));
  }
  return s;
}

BlasCall::BlasCall(ThreadController& threads, double work) {
  // Inside a parallel region OpenBLAS runs on the calling thread alone.
  if (omp_in_parallel()) return;
  if (omp_get_dynamic()) omp_set_dynamic(0);
  const int current = omp_get_max_threads();
  const bool serial = work < kSerialBlasWork;
  threads.count_call(work, serial);
  if (current > threads.max_threads()) {
    // A thread whose OpenMP count came from the environment (OMP_NUM_THREADS above the cores).
    openblas_set_num_threads(serial ? 1 : threads.max_threads());
    restore_ = threads.max_threads();
  } else if (serial && current > 1) {
    openblas_set_num_threads(1);
    restore_ = current;
  }
}

BlasCall::~BlasCall() {
  if (restore_ > 0) openblas_set_num_threads(restore_);
}

}  // namespace cpu
}  // namespace lmtrain
