// A = α JᵀJ + β A at GEMM speed where A has too few output tiles to fill a GPU: J's rows (the
// product's summed dimension K) are split into blocks, every block's product J_bᵀJ_b is formed by
// one strided-batched GEMM into a partial of its own, and the partials are summed elementwise in a
// fixed order (LinearAlgebra::reduce_upper), so the result's bits depend on the inputs only.
//
// Why: on an H200, cuBLAS's SSYRK on W2 (n = 769, 10 000 rows) ran at 5.4 TFLOP/s against a
// measured SGEMM of 51 TFLOP/s (shared/gpu-runs/2026-11-26-h200/README.md): a 769 × 769 output is a
// few dozen tiles for 132 multiprocessors, and SYRK does not split K.  Splitting K into b blocks
// gives b times the tiles, at the price of b partials of n × n and one pass over them.
//
// Written over LinearAlgebra<T> only, so every backend runs it.  The CUDA backend chooses between
// it and SYRK by timing both on the first slice of each shape (syrk_choice.h); the CPU backend
// keeps OpenBLAS's SYRK, and its tests check this algorithm there against SYRK.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lmtrain/backend/linear_algebra.h"

namespace lmtrain {

// How one split-K product of a J (k × n) is cut.
struct SplitKPlan {
  std::size_t n = 0;           // J's columns (A is n × n)
  std::size_t k = 0;           // J's rows
  std::size_t block_rows = 0;  // rows per partial product
  std::size_t blocks = 0;      // partial products, ⌈k / block_rows⌉ (the last may be shorter)
  // A's rows cut into this many panels, each formed only from its diagonal on to the right
  // (rows [i0, i1) × columns [i0, n)): (p + 1)/(2p) of the arithmetic of whole products, in p
  // GEMM launches instead of one.  1: every partial is a whole n × n product.
  std::size_t panels = 1;
  std::size_t ldp = 0;  // row stride of a partial (≥ n)

  std::size_t panel_rows() const { return (n + panels - 1) / panels; }
  // Elements of the workspace the partials take: blocks × n × ldp.
  std::size_t workspace_elements() const { return blocks * n * ldp; }
  // "6 blocks of 1 667 rows, 1 panel".
  std::string describe() const;
};

// Sizing constants of the plans; leads, not measurements (the backend measures the plans against
// SYRK before it uses one).
//   kTile:          the side of the output tile the estimate counts: cuBLAS's large float and
//                   double GEMM kernels on Hopper form 128 × 128 or 128 × 256 tiles per block.
//   kWaves:         blocks enough for twice as many tiles as the device has multiprocessors, so
//                   that the last wave's idle multiprocessors cost at most about a third.
//   kMinBlockRows:  a partial of fewer rows costs more to sum than to form: summing b float
//                   partials reads 4b bytes per element of A (at ~4 TB/s) where forming them
//                   costs 2k flops (at ~50 TFLOP/s), a ratio of 25·b/k — 10 % at 256 rows per
//                   block (20 % for float64).
inline constexpr std::size_t kSplitKTile = 128;
inline constexpr std::size_t kSplitKWaves = 2;
inline constexpr std::size_t kSplitKMinBlockRows = 256;

// The plan for J (k × n) with `panels` panels on a device of `multiprocessors`: blocks so that the
// smallest panel's launch has kSplitKWaves × multiprocessors tiles, each block at least
// kSplitKMinBlockRows rows and at least n rows (so the partials never take more memory than J's
// rows themselves); ldp is n rounded up to `stride_multiple` elements.
SplitKPlan plan_split_k(std::size_t n, std::size_t k, std::size_t panels,
                        std::size_t multiprocessors, std::size_t stride_multiple);

// The plans worth timing against SYRK where A alone has fewer tiles than kSplitKWaves ×
// multiprocessors (n ≤ 2 048 on 132 multiprocessors; above, cuBLAS's SYRK ran at 50 TFLOP/s for
// n = 11 101 on the H200): 1, 2 and 4 panels where each panel is at least two tiles high, and
// only plans that split K at all (two blocks or more).  Empty otherwise, or when J has too few
// rows to split.
std::vector<SplitKPlan> split_k_candidates(std::size_t n, std::size_t k,
                                           std::size_t multiprocessors,
                                           std::size_t stride_multiple);

// Where A alone fills the device (the n split_k_candidates leaves to SYRK): GEMMs over A's upper
// trapezoid in 4 and 8 panels with K not split (one block, one n × n partial: as much memory as
// A), (p + 1)/(2p) of a whole product's arithmetic at GEMM's rate — for a SYRK well below GEMM's:
// cuBLAS's DSYRK ran at 47–54% of DGEMM at n = 11 101 and 30 771 on the H200
// (bench/results/gpu-runs/2026-11-28-h200, W5's float64 A), its SSYRK at 99% of SGEMM.  Each panel
// at least two tiles high; empty where A does not fill the device alone (split_k_candidates'
// case) or n is too small for 4 such panels.
std::vector<SplitKPlan> panel_candidates(std::size_t n, std::size_t k, std::size_t multiprocessors,
                                         std::size_t stride_multiple);

// Upper triangle (row-major) of C (n × n) = α JᵀJ + β C for J (plan.k × plan.n, row stride
// ldj ≥ n) by the plan: the partials in `workspace` (plan.workspace_elements()), then
// reduce_upper.  C's strict lower triangle is left as it was, as syrk_ata leaves it; β = 0 does
// not read C.
template <typename T>
void split_k_syrk_ata(LinearAlgebra<T>& la, const SplitKPlan& plan, T alpha, const T* j,
                      std::size_t ldj, T beta, T* c, T* workspace);

}  // namespace lmtrain
