// Each rank's share of a batch (DESIGN.md §6, "shares of the batch may follow each rank's measured
// Jacobian throughput").  A batch is split into contiguous blocks, one per rank in rank order:
//   equal     block r is [count·r/R, count·(r+1)/R) — what every run did before;
//   measured  the blocks follow shares s_r ∝ the throughput (samples per second of forward pass
//             and Jacobian) each rank measured on the previous steps, so that a slower rank
//             (fewer cores, a busier node, an older device) is not the one everybody waits for.
// Any split gives the same A = Σ_r J_rᵀJ_r and g up to the order of summation, because every
// sample of the batch is linearized by exactly one rank.  The shares are recomputed after every
// step from an all-gather of the ranks' measurements, by the same arithmetic on every rank, so
// they agree bit for bit.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "lmtrain/dist/communicator.h"

namespace lmtrain {

enum class BatchBalance { kEqual, kMeasured };
std::string_view to_string(BatchBalance b);
std::optional<BatchBalance> parse_batch_balance(std::string_view s);

class BatchShares {
 public:
  // A rank's share stays within [kMinShare, kMaxShare] × 1/R: a rank keeps enough samples to be
  // measured, and no rank's buffers (sized by max_shard) grow past twice the equal share.
  static constexpr double kMinShare = 0.25, kMaxShare = 2.0;

  BatchShares(BatchBalance mode, int ranks, int rank);

  BatchBalance mode() const { return mode_; }
  // This rank's block [first, first + size) of the `count` samples starting at `first`.
  std::pair<std::size_t, std::size_t> shard(std::size_t first, std::size_t count) const;
  // The most samples any rank can be given of a batch of `batch`: what its buffers hold.
  std::size_t max_shard(std::size_t batch) const;
  // After a step: this rank linearized `samples` samples in `seconds` (forward pass and Jacobian).
  // With measured balance, gathers every rank's throughput over its recent steps (collective:
  // every rank calls it after every step) and sets the shares of the next step; with equal
  // balance it does nothing.
  void record(double seconds, std::size_t samples, dist::Communicator* comm);
  const std::vector<double>& shares() const { return shares_; }
  // Sets the shares (one per rank, positive, summing to 1): a resume that keeps them, or a test.
  // Throws InvalidArgument otherwise.
  void set_shares(const std::vector<double>& shares);

  // The shares after one measurement: halfway from `shares` towards the measured throughputs'
  // proportions (samples per second; a rank without a usable measurement keeps its share), kept
  // within [kMinShare/R, kMaxShare/R] and summing to 1.
  static std::vector<double> next_shares(const std::vector<double>& shares,
                                         const std::vector<double>& throughput);

 private:
  // How much of the previous steps' measurements the next one keeps.
  static constexpr double kMemory = 0.8;
  BatchBalance mode_;
  int ranks_, rank_;
  std::vector<double> shares_;
  double recent_samples_ = 0, recent_seconds_ = 0;  // this rank's decayed sums
};

}  // namespace lmtrain
