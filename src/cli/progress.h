// Feedback while training runs: a progress bar redrawn in place when stdout is a terminal
// (batches, loss, λ, accepted/rejected, ETA), one line per epoch otherwise (logs, CI).
#pragma once

#include <cstddef>

#include "lmtrain/train/summary.h"
#include "lmtrain/train/trainer.h"

namespace lmtrain::cli {

class Progress {
 public:
  Progress(int max_epochs, std::size_t batches_per_epoch, bool enabled);
  void on_step(const IterationSummary& it);
  void on_epoch(const EpochRecord& record);
  // Ends an unfinished bar line.
  void finish();

 private:
  int max_epochs_;
  std::size_t batches_;
  bool enabled_;
  bool terminal_;
  bool bar_open_ = false;
  int accepted_ = 0;
  int rejected_ = 0;
  double epoch_start_seconds_ = 0;
};

}  // namespace lmtrain::cli
