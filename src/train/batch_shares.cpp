#include "lmtrain/train/batch_shares.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

std::pair<std::size_t, std::size_t> BatchShares::shard(std::size_t first,
                                                       std::size_t count) const {
  const auto r = static_cast<std::size_t>(rank_), size = static_cast<std::size_t>(ranks_);
  if (mode_ == BatchBalance::kEqual) {
    const std::size_t lo = count * r / size, hi = count * (r + 1) / size;
    return {first + lo, hi - lo};
  }
  // Block boundaries at the rounded cumulative shares; the last one is the batch's end.
  const auto boundary = [&](std::size_t k) {
    if (k >= size) return count;
    const double before = std::accumulate(shares_.begin(), shares_.begin() + k, 0.0);
    return std::min(count, static_cast<std::size_t>(std::llround(before * static_cast<double>(count))));
  };
  const std::size_t lo = boundary(r), hi = std::max(lo, boundary(r + 1));
  return {first + lo, hi - lo};
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
  const double mine = samples > 0 && seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
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
  // Clamp and renormalize until the bounds hold (each round fixes at least one rank at a bound).
  for (std::size_t round = 0; round <= ranks; ++round) {
    double sum = 0;
    for (double& s : next) sum += (s = std::clamp(s, lo, hi));
    if (std::fabs(sum - 1.0) < 1e-12) break;
    for (double& s : next) s /= sum;
  }
  return next;
}

}  // namespace lmtrain
