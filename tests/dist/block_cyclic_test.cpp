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

}  // namespace
}  // namespace lmtrain::dist
