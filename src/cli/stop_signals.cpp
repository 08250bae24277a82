#include "stop_signals.h"

#include <fmt/format.h>
#include <semaphore.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include "lmtrain/core/error.h"

namespace lmtrain::cli {
namespace {

// State the handler touches: lock-free atomics, a semaphore and a fixed buffer, nothing that
// allocates or locks.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signals{0};  // received so far
std::atomic<int> g_first{0};    // the first one's number
std::atomic<bool> g_closing{false};
sem_t g_wake;  // posted by the first signal and by ~StopSignals
char g_second_message[1024];
std::size_t g_second_length = 0;

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

extern "C" void on_stop_signal(int signal) {
  // Every later write to a closed pipe raises SIGPIPE again: only the first signal of all may be
  // one, and it never counts as the second.
  if (signal == SIGPIPE && g_signals.load() > 0) return;
  const int seen = g_signals.fetch_add(1);
  if (seen == 0) {
    g_first.store(signal);
    g_stop.store(true);
    sem_post(&g_wake);
    return;
  }
  // The second: the user means it.
  [[maybe_unused]] const ssize_t written =
      ::write(STDERR_FILENO, g_second_message, g_second_length);
  ::_exit(128 + signal);
}

void install(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGPIPE, &action, nullptr);
}

// Writes a whole line to stderr with write(2) (usable in the watchdog after the step hung in a
// thread that may hold stdio's lock).
void write_line(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The watchdog: waits for the first signal, then for the stop to finish within the grace period.
void watch(double grace_seconds, const std::string& checkpoint) {
  while (sem_wait(&g_wake) != 0 && errno == EINTR) {
  }
  if (g_closing) return;
  // The first signal: the trainer has until the deadline to finish its step and checkpoint.
  const int first = g_first.load();
  if (std::isfinite(grace_seconds)) {
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    const double whole = std::floor(grace_seconds);
    deadline.tv_sec += static_cast<time_t>(whole);
    deadline.tv_nsec += static_cast<long>((grace_seconds - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    while ((rc = sem_clockwait(&g_wake, CLOCK_MONOTONIC, &deadline)) != 0 && errno == EINTR) {
    }
    if (rc != 0 && errno == ETIMEDOUT && !g_closing) {
      write_line(fmt::format(
          "lmtrain: the step still runs {} s after signal {} (trainer.stop_grace_s): stopping at "
          "once; the last checkpoint written, if any, is {}\n",
          grace_seconds, first, checkpoint));
      ::_exit(128 + first);
    }
  }
}

}  // namespace

StopSignals::StopSignals(double grace_seconds, const std::string& checkpoint) {
  const std::string second = fmt::format(
      "lmtrain: second signal: stopping at once; the last checkpoint written, if any, is {}\n",
      checkpoint);
  g_second_length = std::min(second.size(), sizeof g_second_message);
  std::memcpy(g_second_message, second.data(), g_second_length);
  g_stop = false;
  g_signals = 0;
  g_first = 0;
  g_closing = false;
  if (sem_init(&g_wake, 0, 0) != 0)
    throw Error(fmt::format("cannot start the stop watchdog: sem_init: {}", std::strerror(errno)));
  watchdog_ = std::thread([grace_seconds, checkpoint] { watch(grace_seconds, checkpoint); });
  install(on_stop_signal);
}

StopSignals::~StopSignals() {
  install(SIG_DFL);
  g_closing = true;
  sem_post(&g_wake);
  watchdog_.join();
  sem_destroy(&g_wake);
}

const std::atomic<bool>* StopSignals::stop_flag() const {
  return &g_stop;
}

int StopSignals::signal() const {
  return g_first.load();
}

IterationCallback slow_step_for_tests() {
  const char* text = std::getenv("LMTRAIN_TEST_SLOW_STEP");
  if (text == nullptr) return {};
  int step = 0;
  double seconds = 0;
  if (std::sscanf(text, "%d:%lf", &step, &seconds) != 2 || step < 1 || !(seconds >= 0))
    throw InvalidArgument(fmt::format(
        "LMTRAIN_TEST_SLOW_STEP = \"{}\": expected STEP:SECONDS, e.g. 3:60 (a test's slow step)",
        text));
  return [step, seconds](const IterationSummary& it) {
    if (it.step == step) {
      fmt::print(stderr, "lmtrain: LMTRAIN_TEST_SLOW_STEP: sleeping {} s after step {}\n", seconds,
                 step);
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    }
    return CallbackResult::kContinue;
  };
}

}  // namespace lmtrain::cli
