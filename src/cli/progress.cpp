#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace lmtrain::cli {

Progress::Progress(int max_epochs, std::size_t batches_per_epoch, bool enabled)
    : max_epochs_(max_epochs),
      batches_(batches_per_epoch),
      enabled_(enabled),
      terminal_(isatty(fileno(stdout)) != 0) {}

void Progress::on_step(const IterationSummary& it) {
  accepted_ += it.report.accepted ? 1 : 0;
  rejected_ += it.report.rejected + it.report.invalid;
  if (!enabled_ || !terminal_) return;
  if (it.batch == 0) epoch_start_seconds_ = it.elapsed_seconds - 0.0;
  const std::size_t done = it.batch + 1;
  constexpr int kWidth = 24;
  const int filled =
      static_cast<int>(kWidth * static_cast<double>(done) / static_cast<double>(batches_));
  const double per_batch = (it.elapsed_seconds - epoch_start_seconds_) / static_cast<double>(done);
  const double eta = per_batch * static_cast<double>(batches_ - done);
  fmt::print(
      "\repoch {:>4}/{} [{:#<{}}{:-<{}}] {:>5}/{} loss {:.4e} λ {:.1e} acc {} rej {} ETA {:.0f}s ",
      it.epoch, max_epochs_, "", filled, "", kWidth - filled, done, batches_, it.batch_loss,
      it.lambda, accepted_, rejected_, std::max(0.0, eta));
  std::fflush(stdout);
  bar_open_ = true;
}

void Progress::on_epoch(const EpochRecord& r) {
  if (enabled_) {
    if (bar_open_) fmt::print("\r\033[K");
    bar_open_ = false;
    std::string validation;
    if (!std::isnan(r.validation_loss))
      validation = fmt::format("  validation {:.6e}", r.validation_loss);
    fmt::print("epoch {:>4}/{}  loss {:.6e}{}  λ {:.2e}  accepted {}/{}  {:.2f}s\n", r.epoch,
               max_epochs_, r.training_loss, validation, r.lambda, r.accepted,
               r.accepted + r.rejected + r.invalid, r.seconds);
    std::fflush(stdout);
  }
  accepted_ = rejected_ = 0;
}

void Progress::finish() {
  if (bar_open_) fmt::print("\n");
  bar_open_ = false;
}

}  // namespace lmtrain::cli
