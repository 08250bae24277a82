// The 2-D block-cyclic layout of ScaLAPACK (and cuSOLVERMp, which uses the same descriptors):
// R ranks form a Pr × Pc process grid, rank = row·Pc + col (BLACS' "Row" order); an n × n matrix
// is cut into nb × nb blocks and block (I, J) lives on process (I mod Pr, J mod Pc).  Each rank
// stores its blocks column-major, as one local matrix of local_rows() × local_cols() with leading
// dimension local_ld().  Formulas: ScaLAPACK Users' Guide §4.3 (NUMROC, INDXG2L, INDXG2P).
#pragma once

#include <cstddef>
#include <string>

namespace lmtrain::dist {

struct ProcessGrid {
  int rows = 1, cols = 1;  // Pr × Pc
  int row = 0, col = 0;    // this rank's coordinates
  // The grid of `ranks` processes closest to square with rows ≤ cols (1×2, 1×3, 2×2, 2×3, …):
  // the panel and update traffic of a Cholesky factorization is least on a square grid.
  static ProcessGrid for_ranks(int ranks, int rank);
  int size() const { return rows * cols; }
  int rank_of(int r, int c) const { return r * cols + c; }
  std::string describe() const;  // "2×2"
};

struct BlockCyclicLayout {
  std::size_t n = 0;   // global rows and columns
  std::size_t nb = 1;  // block size
  ProcessGrid grid;

  // Rows (or columns) of n, in blocks of nb dealt over `procs` processes, that process `proc`
  // holds (ScaLAPACK's NUMROC with source process 0).
  static std::size_t local_count(std::size_t n, std::size_t nb, int proc, int procs);
  std::size_t local_rows() const { return local_count(n, nb, grid.row, grid.rows); }
  std::size_t local_cols() const { return local_count(n, nb, grid.col, grid.cols); }
  std::size_t local_ld() const { return local_rows() > 0 ? local_rows() : 1; }
  std::size_t local_elements() const { return local_rows() * local_cols(); }
  // Global row (column) i: the process row (column) that owns it and its index there.
  int row_owner(std::size_t i) const { return static_cast<int>((i / nb) % grid.rows); }
  int col_owner(std::size_t j) const { return static_cast<int>((j / nb) % grid.cols); }
  std::size_t local_row(std::size_t i) const { return (i / nb / grid.rows) * nb + i % nb; }
  std::size_t local_col(std::size_t j) const { return (j / nb / grid.cols) * nb + j % nb; }
  // The block size for a requested one (0: auto). Auto is 256, the best measured for pdpotrf on
  // CPU ranks (bench/results/2026-11-25-2core-amd-epyc-distributed-potrf.md), unless that leaves a
  // process row or column fewer than 8 blocks of A: then n / (8·max(Pr, Pc)) rounded down to a
  // multiple of 32, at least 32, so that small matrices still deal evenly and the reduce-scatter's
  // panels (nb·Pc columns) stay small beside a rank's share.
  static std::size_t block_size(std::size_t requested, std::size_t n, const ProcessGrid& grid);
  // The most elements any rank of the grid holds: process (0, 0)'s share.
  std::size_t largest_share() const {
    return local_count(n, nb, 0, grid.rows) * local_count(n, nb, 0, grid.cols);
  }
};

}  // namespace lmtrain::dist
