#include "lmtrain/dist/block_cyclic.h"

#include <fmt/format.h>

namespace lmtrain::dist {

ProcessGrid ProcessGrid::for_ranks(int ranks, int rank) {
  ProcessGrid g;
  for (int r = 1; r * r <= ranks; ++r)
    if (ranks % r == 0) g.rows = r;
  g.cols = ranks / g.rows;
  g.row = rank / g.cols;
  g.col = rank % g.cols;
  return g;
}

std::string ProcessGrid::describe() const {
  return fmt::format("{}×{}", rows, cols);
}

std::size_t BlockCyclicLayout::local_count(std::size_t n, std::size_t nb, int proc, int procs) {
  const auto p = static_cast<std::size_t>(procs), me = static_cast<std::size_t>(proc);
  const std::size_t blocks = n / nb;  // whole blocks
  std::size_t count = (blocks / p) * nb;
  const std::size_t extra = blocks % p;
  if (me < extra)
    count += nb;
  else if (me == extra)
    count += n % nb;  // the last, partial block
  return count;
}

std::size_t BlockCyclicLayout::block_size(std::size_t requested, std::size_t n,
                                          const ProcessGrid& grid) {
  if (requested > 0) return requested;
  constexpr std::size_t kLargest = 256, kSmallest = 32, kBlocksPerProcess = 8;
  const auto side = static_cast<std::size_t>(grid.rows > grid.cols ? grid.rows : grid.cols);
  const std::size_t fit = n / (kBlocksPerProcess * side) / kSmallest * kSmallest;
  return fit >= kLargest ? kLargest : (fit > kSmallest ? fit : kSmallest);
}

}  // namespace lmtrain::dist
