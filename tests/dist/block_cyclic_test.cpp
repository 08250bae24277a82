// The block-cyclic layout (dist/block_cyclic.h) against a direct count: every global row and
// column has one owner, local indices run 0 … local_count − 1 in global order, and local_count is
// what the owner holds.
#include "lmtrain/dist/block_cyclic.h"

#include <gtest/gtest.h>

#include <vector>

namespace lmtrain::dist {
namespace {

TEST(ProcessGrid, IsTheSquarestFactorizationWithRowsAtMostColumns) {
  const int expected[][2] = {{1, 1}, {1, 2}, {1, 3}, {2, 2}, {1, 5},  {2, 3},
                             {1, 7}, {2, 4}, {3, 3}, {2, 5}, {1, 11}, {3, 4}};
  for (int ranks = 1; ranks <= 12; ++ranks) {
    const ProcessGrid g = ProcessGrid::for_ranks(ranks, ranks - 1);
    EXPECT_EQ(g.rows, expected[ranks - 1][0]) << ranks;
    EXPECT_EQ(g.cols, expected[ranks - 1][1]) << ranks;
    EXPECT_EQ(g.rank_of(g.row, g.col), ranks - 1);
  }
  EXPECT_EQ(ProcessGrid::for_ranks(64, 0).describe(), "8×8");
}

TEST(BlockCyclicLayout, LocalCountsAndIndicesMatchADirectCount) {
  for (std::size_t n : {1u, 7u, 64u, 65u, 3001u})
    for (std::size_t nb : {1u, 3u, 64u})
      for (int procs : {1, 2, 3, 4}) {
        BlockCyclicLayout l{n, nb, ProcessGrid{procs, procs, 0, 0}};
        std::vector<std::size_t> counted(static_cast<std::size_t>(procs), 0);
        for (std::size_t i = 0; i < n; ++i) {
          const int owner = l.row_owner(i);
          ASSERT_GE(owner, 0);
          ASSERT_LT(owner, procs);
          // Rows of one owner get consecutive local indices in global order.
          EXPECT_EQ(l.local_row(i), counted[static_cast<std::size_t>(owner)]) << n << " " << nb;
          EXPECT_EQ(l.col_owner(i), owner);
          EXPECT_EQ(l.local_col(i), l.local_row(i));
          ++counted[static_cast<std::size_t>(owner)];
        }
        for (int p = 0; p < procs; ++p)
          EXPECT_EQ(BlockCyclicLayout::local_count(n, nb, p, procs),
                    counted[static_cast<std::size_t>(p)])
              << "n " << n << " nb " << nb << " p " << p << "/" << procs;
      }
}

TEST(BlockCyclicLayout, LargestShareIsProcessZeros) {
  const BlockCyclicLayout l{3001, 64, ProcessGrid::for_ranks(4, 0)};
  std::size_t largest = 0, total = 0;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) {
      const std::size_t share = BlockCyclicLayout::local_count(3001, 64, r, 2) *
                                BlockCyclicLayout::local_count(3001, 64, c, 2);
      largest = std::max(largest, share);
      total += share;
    }
  EXPECT_EQ(total, 3001u * 3001u);
  EXPECT_EQ(l.largest_share(), largest);
}

TEST(BlockCyclicLayout, AutoBlockSizeIs256UnlessAProcessGetsFewerThanEightBlocks) {
  const ProcessGrid two_by_two = ProcessGrid::for_ranks(4, 0),
                    one_by_two = ProcessGrid::for_ranks(2, 0);
  EXPECT_EQ(BlockCyclicLayout::block_size(64, 20000, two_by_two), 64u);  // asked for: kept
  EXPECT_EQ(BlockCyclicLayout::block_size(0, 21141, two_by_two), 256u);
  EXPECT_EQ(BlockCyclicLayout::block_size(0, 4096, two_by_two), 256u);  // 8 blocks per side of 2
  EXPECT_EQ(BlockCyclicLayout::block_size(0, 4095, two_by_two), 224u);  // 4095 / 16 = 255 → 224
  EXPECT_EQ(BlockCyclicLayout::block_size(0, 2101, one_by_two), 128u);  // 2101 / 16 = 131 → 128
  EXPECT_EQ(BlockCyclicLayout::block_size(0, 91, two_by_two), 32u);     // never below 32
  EXPECT_EQ(BlockCyclicLayout::block_size(0, 3001, ProcessGrid::for_ranks(1, 0)), 256u);
  // Every process row and column of an auto layout gets at least 8 blocks until the 32 floor.
  for (int ranks : {1, 2, 3, 4, 6, 8, 64})
    for (std::size_t n : {1000u, 2101u, 5000u, 20000u, 100000u}) {
      const ProcessGrid g = ProcessGrid::for_ranks(ranks, 0);
      const std::size_t nb = BlockCyclicLayout::block_size(0, n, g);
      EXPECT_EQ(nb % 32, 0u);
      if (nb > 32) {
        EXPECT_GE(n / nb, 8u * static_cast<std::size_t>(std::max(g.rows, g.cols)))
            << n << " on " << ranks << " ranks: " << nb;
      }
    }
}

}  // namespace
}  // namespace lmtrain::dist
