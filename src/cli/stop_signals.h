// SIGINT, SIGTERM and SIGPIPE during `lmtrain fit`: a stop that always stops.
//
// SIGPIPE is the reader of the progress lines gone (`lmtrain fit run.toml | head`): by default it
// killed the run between checkpoints and left no model; now it stops the run as SIGTERM does,
// with a checkpoint to resume from (exit 141).  Its repeats — every later write to the closed
// pipe — are not a second signal.
//
// The first signal asks the trainer to stop after the step under way (Trainer::set_stop_flag),
// which writes a checkpoint.  A second signal, or the stop not done `grace_seconds` after the
// first (TrainerOptions::stop_grace_s: a step that runs on, a hung collective), ends the process
// at once with exit code 128 + the signal (130 for SIGINT, 143 for SIGTERM).  Nothing is lost
// that was saved: checkpoints replace the previous one atomically (io/atomic_write.h), so a kill
// at any moment leaves the last complete checkpoint loadable.
//
// Async-signal-safety: the handler only counts, raises an atomic flag, posts a semaphore and,
// on the second signal, write()s a preformatted line and _exit()s — all async-signal-safe
// (POSIX.1-2017, 2.4.3).  The grace period is kept by a watchdog thread waiting on that
// semaphore, never by work in the handler.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "lmtrain/train/trainer.h"

namespace lmtrain::cli {

class StopSignals {
 public:
  // Installs the handlers (one StopSignals at a time); `checkpoint` is named in the message of an
  // immediate stop.
  StopSignals(double grace_seconds, const std::string& checkpoint);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // Restores the default dispositions and ends the watchdog.
  ~StopSignals();

  // Raised by the first signal; for Trainer::set_stop_flag.
  const std::atomic<bool>* stop_flag() const;
  // The first signal received (SIGINT, SIGTERM), 0 while none.
  int signal() const;

 private:
  std::thread watchdog_;
};

// A test's stand-in for a step that runs on: with LMTRAIN_TEST_SLOW_STEP = "STEP:SECONDS" in the
// environment, a callback that sleeps SECONDS after LM step STEP (before the stop flag is read);
// an empty callback otherwise, so training pays nothing for it.
IterationCallback slow_step_for_tests();

}  // namespace lmtrain::cli
