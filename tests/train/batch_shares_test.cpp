// Batch shares (train/batch_shares.h): every sample of a batch goes to exactly one rank, equal
// shares are the old blocks, and measured shares move towards the measured throughputs within
// their bounds.
#include "lmtrain/train/batch_shares.h"

#include <gtest/gtest.h>

#include <numeric>

namespace lmtrain {
namespace {

// The blocks of all ranks for `count` samples starting at 100.
std::vector<std::pair<std::size_t, std::size_t>> blocks(BatchBalance mode, int ranks,
                                                        const std::vector<double>& shares,
                                                        std::size_t count) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (int r = 0; r < ranks; ++r) {
    BatchShares s(mode, ranks, r);
    if (!shares.empty()) s.set_shares(shares);
    out.push_back(s.shard(100, count));
  }
  return out;
}

// Contiguous, in rank order, covering [100, 100 + count) exactly once.
void expect_partition(const std::vector<std::pair<std::size_t, std::size_t>>& b,
                      std::size_t count) {
  std::size_t next = 100;
  for (const auto& [first, size] : b) {
    EXPECT_EQ(first, next);
    next += size;
  }
  EXPECT_EQ(next, 100 + count);
}

TEST(BatchShares, EqualSharesAreTheContiguousBlocksOfBefore) {
  for (int ranks : {1, 2, 3, 4, 7})
    for (std::size_t count : {0u, 1u, 5u, 90u, 1001u}) {
      const auto b = blocks(BatchBalance::kEqual, ranks, {}, count);
      expect_partition(b, count);
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(b[r].second, count * (r + 1) / ranks - count * r / ranks);
    }
}

TEST(BatchShares, MeasuredBlocksFollowTheSharesAndCoverTheBatch) {
  const std::vector<double> shares{0.1, 0.4, 0.2, 0.3};
  for (std::size_t count : {0u, 1u, 7u, 1000u, 10001u}) {
    const auto b = blocks(BatchBalance::kMeasured, 4, shares, count);
    expect_partition(b, count);
    for (int r = 0; r < 4; ++r)
      EXPECT_NEAR(static_cast<double>(b[r].second), shares[r] * static_cast<double>(count), 1.0);
  }
}

TEST(BatchShares, MeasuredSharesMoveHalfwayTowardsThroughputWithinBounds) {
  // Rank 1 measured at a third of rank 0's throughput: the target split is 3/4 : 1/4, and one
  // step moves halfway from 1/2 : 1/2.
  const std::vector<double> one = BatchShares::next_shares({0.5, 0.5}, {300.0, 100.0});
  EXPECT_NEAR(one[0], 0.625, 1e-15);
  EXPECT_NEAR(one[1], 0.375, 1e-15);
  // Repeated, it converges to the measured proportions.
  std::vector<double> s{0.5, 0.5};
  for (int k = 0; k < 60; ++k) s = BatchShares::next_shares(s, {300.0, 100.0});
  EXPECT_NEAR(s[0], 0.75, 1e-12);
  // A rank 100 times slower keeps kMinShare/R of the batch; the others share the rest.
  s = {0.25, 0.25, 0.25, 0.25};
  for (int k = 0; k < 60; ++k) s = BatchShares::next_shares(s, {100.0, 100.0, 100.0, 1.0});
  EXPECT_NEAR(s[3], BatchShares::kMinShare / 4, 1e-12);
  EXPECT_NEAR(std::accumulate(s.begin(), s.end(), 0.0), 1.0, 1e-12);
  EXPECT_NEAR(s[0], (1 - BatchShares::kMinShare / 4) / 3, 1e-12);
  // No rank above kMaxShare/R, whatever it measures.
  s = {0.25, 0.25, 0.25, 0.25};
  for (int k = 0; k < 60; ++k) s = BatchShares::next_shares(s, {1e6, 1.0, 1.0, 1.0});
  EXPECT_LE(s[0], BatchShares::kMaxShare / 4 + 1e-12);
  // A rank without a measurement (an empty shard) keeps its share; nothing measured, nothing
  // changes.
  const std::vector<double> kept = BatchShares::next_shares({0.2, 0.3, 0.5}, {0.0, 300.0, 500.0});
  EXPECT_NEAR(kept[0], 0.2, 1e-15);
  EXPECT_EQ(BatchShares::next_shares({0.2, 0.8}, {0.0, 0.0}), (std::vector<double>{0.2, 0.8}));
}

TEST(BatchShares, MaxShardBoundsEveryRanksBlock) {
  for (int ranks : {2, 3, 4}) {
    BatchShares s(BatchBalance::kMeasured, ranks, 0);
    const std::size_t batch = 1000;
    EXPECT_GE(s.max_shard(batch), static_cast<std::size_t>(BatchShares::kMaxShare * batch / ranks));
    EXPECT_LE(s.max_shard(batch), batch);
  }
  EXPECT_EQ(BatchShares(BatchBalance::kEqual, 4, 0).max_shard(90), 23u);
  EXPECT_EQ(parse_batch_balance("measured"), BatchBalance::kMeasured);
  EXPECT_FALSE(parse_batch_balance("fast"));
}

}  // namespace
}  // namespace lmtrain
