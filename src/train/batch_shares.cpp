#include "lmtrain/train/batch_shares.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lmtrain/core/error.h"

namespace lmtrain {

std::string_view to_string(BatchBalance b) {
  return b == BatchBalance::kEqual ? "equal" : "measured";
}

std::optional<BatchBalance> parse_batch_balance(std::string_view s) {
  for (auto b : {BatchBalance::kEqual, BatchBalance::kMeasured})
    if (to_string(b) == s) return b;
  return std::nullopt;
}

BatchShares::BatchShares(BatchBalance mode, int ranks, int rank)
    : mode_(mode),
      ranks_(ranks),
      rank_(rank),
      shares_(static_cast<std::size_t>(ranks), 1.0 / ranks) {}

std::pair<std::size_t, std::size_t> BatchShares::shard(std::size_t first, std::size_t count) const {
  const auto r = static_cast<std::size_t>(rank_), size = static_cast<std::size_t>(ranks_);
  if (mode_ == BatchBalance::kEqual) {
    const std::size_t lo = count * r / size, hi = count * (r + 1) / size;
    return {first + lo, hi - lo};
  }
  // Block boundaries at the rounded cumulative shares; the last one is the batch's end.
  const auto boundary = [&](std::size_t k) {
    if (k >= size) return count;
    const double before = std::accumulate(shares_.begin(), shares_.begin() + k, 0.0);
    return std::min(count,
                    static_cast<std::size_t>(std::llround(before * static_cast<double>(count))));
  };
  const std::size_t lo = boundary(r), hi = std::max(lo, boundary(r + 1));
  return {first + lo, hi - lo};
}

void BatchShares::set_shares(const std::vector<double>& shares) {
  double sum = 0;
  bool positive = shares.size() == shares_.size();
  for (double s : shares) {
    positive = positive && s > 0 && std::isfinite(s);
    sum += s;
  }
  if (!positive || std::fabs(sum - 1.0) > 1e-9)
    throw InvalidArgument(fmt::format(
        "BatchShares::set_shares: expected {} positive shares summing to 1, got {} summing to {}",
        shares_.size(), shares.size(), sum));
  shares_ = shares;
}

std::size_t BatchShares::max_shard(std::size_t batch) const {
  const auto size = static_cast<std::size_t>(ranks_);
  if (mode_ == BatchBalance::kEqual || size == 1) return (batch + size - 1) / size;
  // A rank's share is at most kMaxShare/R; rounding both of its boundaries adds at most one.
  const double most = std::min(1.0, kMaxShare / ranks_) * static_cast<double>(batch);
  return std::min(batch, static_cast<std::size_t>(std::ceil(most)) + 1);
}

void BatchShares::record(double seconds, std::size_t samples, dist::Communicator* comm) {
  if (mode_ == BatchBalance::kEqual || ranks_ == 1 || comm == nullptr) return;
  // Samples and seconds summed over the recent steps (each step's weight decaying by kMemory),
  // not a ratio per step: a phase of a few milliseconds on a shared core is measured in whole
  // scheduler slices, so single steps scatter by an order of magnitude while the sums converge.
  if (seconds > 0 && std::isfinite(seconds)) {
    recent_samples_ = kMemory * recent_samples_ + static_cast<double>(samples);
    recent_seconds_ = kMemory * recent_seconds_ + seconds;
  }
  const double mine = recent_seconds_ > 0 ? recent_samples_ / recent_seconds_ : 0.0;
  std::vector<double> throughput(shares_.size());
  comm->allgather(&mine, sizeof mine, throughput.data());
  shares_ = next_shares(shares_, throughput);
}

std::vector<double> BatchShares::next_shares(const std::vector<double>& shares,
                                             const std::vector<double>& throughput) {
  const std::size_t ranks = shares.size();
  // Ranks without a measurement (an empty shard, a clock that did not tick) count as measured at
  // the throughput that would keep their share: the mean throughput per unit of share of the
  // others.
  double measured_share = 0, measured_throughput = 0;
  for (std::size_t r = 0; r < ranks; ++r)
    if (throughput[r] > 0 && std::isfinite(throughput[r])) {
      measured_share += shares[r];
      measured_throughput += throughput[r];
    }
  if (measured_throughput <= 0) return shares;
  const double per_share = measured_throughput / measured_share;
  std::vector<double> next(ranks);
  double total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    const bool ok = throughput[r] > 0 && std::isfinite(throughput[r]);
    next[r] = ok ? throughput[r] : shares[r] * per_share;
    total += next[r];
  }
  // Halfway towards the measured proportions: one noisy step moves a share by half its error.
  for (std::size_t r = 0; r < ranks; ++r) next[r] = 0.5 * shares[r] + 0.5 * next[r] / total;
  const double lo = kMinShare / static_cast<double>(ranks);
  const double hi = std::min(1.0, kMaxShare / static_cast<double>(ranks));
  // Water-filling: ranks past a bound are held there and the rest rescaled to fill what is left,
  // until no free rank is past a bound (each round holds at least one more rank).
  std::vector<bool> held(ranks, false);
  for (std::size_t round = 0; round <= ranks; ++round) {
    double held_sum = 0, free_sum = 0;
    for (std::size_t r = 0; r < ranks; ++r) (held[r] ? held_sum : free_sum) += next[r];
    if (free_sum <= 0) break;
    bool changed = false;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (held[r]) continue;
      next[r] *= (1.0 - held_sum) / free_sum;
      if (next[r] < lo || next[r] > hi) {
        next[r] = std::clamp(next[r], lo, hi);
        held[r] = changed = true;
      }
    }
    if (!changed) break;
  }
  return next;
}

}  // namespace lmtrain
