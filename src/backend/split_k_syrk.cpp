#include "lmtrain/backend/split_k_syrk.h"

#include <fmt/format.h>

#include <algorithm>

namespace lmtrain {
namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

}  // namespace

std::string SplitKPlan::describe() const {
  return fmt::format("{} block{} of {} rows, {} panel{}", blocks, blocks == 1 ? "" : "s",
                     block_rows, panels, panels == 1 ? "" : "s");
}

SplitKPlan plan_split_k(std::size_t n, std::size_t k, std::size_t panels,
                        std::size_t multiprocessors, std::size_t stride_multiple) {
  SplitKPlan plan;
  plan.n = n;
  plan.k = k;
  plan.panels = std::max<std::size_t>(panels, 1);
  plan.ldp = ceil_div(n, std::max<std::size_t>(stride_multiple, 1)) *
             std::max<std::size_t>(stride_multiple, 1);
  // The last panel is the smallest launch: its rows by as many columns.
  const std::size_t last = n - std::min(n, (plan.panels - 1) * plan.panel_rows());
  const std::size_t tiles = std::max<std::size_t>(ceil_div(last, kSplitKTile), 1);
  const std::size_t wanted =
      ceil_div(kSplitKWaves * std::max<std::size_t>(multiprocessors, 1), tiles * tiles);
  const std::size_t most = std::max<std::size_t>(k / std::max(n, kSplitKMinBlockRows), 1);
  const std::size_t blocks = std::clamp<std::size_t>(wanted, 1, most);
  plan.block_rows = std::max<std::size_t>(ceil_div(k, blocks), 1);
  plan.blocks = k == 0 ? 0 : ceil_div(k, plan.block_rows);
  return plan;
}

std::vector<SplitKPlan> split_k_candidates(std::size_t n, std::size_t k,
                                           std::size_t multiprocessors,
                                           std::size_t stride_multiple) {
  std::vector<SplitKPlan> plans;
  const std::size_t tiles = ceil_div(n, kSplitKTile);
  if (tiles * tiles >= kSplitKWaves * multiprocessors) return plans;  // A fills the device alone
  for (const std::size_t panels : {1, 2, 4}) {
    if (panels > 1 && n < 2 * kSplitKTile * panels) break;
    const SplitKPlan plan = plan_split_k(n, k, panels, multiprocessors, stride_multiple);
    if (plan.blocks >= 2) plans.push_back(plan);
  }
  return plans;
}

std::vector<SplitKPlan> panel_candidates(std::size_t n, std::size_t k, std::size_t multiprocessors,
                                         std::size_t stride_multiple) {
  std::vector<SplitKPlan> plans;
  const std::size_t tiles = ceil_div(n, kSplitKTile);
  if (k == 0 || tiles * tiles < kSplitKWaves * multiprocessors) return plans;
  for (const std::size_t panels : {4, 8}) {
    if (n < 2 * kSplitKTile * panels) break;
    SplitKPlan plan = plan_split_k(n, k, panels, multiprocessors, stride_multiple);
    plan.block_rows = k;  // K not split: one partial, the whole product's trapezoid
    plan.blocks = 1;
    plans.push_back(plan);
  }
  return plans;
}

template <typename T>
void split_k_syrk_ata(LinearAlgebra<T>& la, const SplitKPlan& plan, T alpha, const T* j,
                      std::size_t ldj, T beta, T* c, T* workspace) {
  const std::size_t n = plan.n, ldp = plan.ldp, stride = n * ldp;
  if (n == 0) return;
  const std::size_t full = plan.k / plan.block_rows;  // blocks of block_rows rows
  const std::size_t rest = plan.k - full * plan.block_rows;
  const std::size_t h = plan.panel_rows();
  for (std::size_t i0 = 0; i0 < n; i0 += h) {
    // Rows [i0, i1) of every partial, columns [i0, n): J[:, i0:i1]ᵀ J[:, i0:n] of each block.
    const std::size_t rows = std::min(h, n - i0), cols = n - i0;
    T* p = workspace + i0 * ldp + i0;
    if (full > 0)
      la.gemm_strided_batched(Trans::kYes, Trans::kNo, rows, cols, plan.block_rows, alpha, j + i0,
                              ldj, plan.block_rows * ldj, j + i0, ldj, plan.block_rows * ldj, T(0),
                              p, ldp, stride, full);
    if (rest > 0) {
      const T* tail = j + full * plan.block_rows * ldj + i0;
      la.gemm(Trans::kYes, Trans::kNo, rows, cols, rest, alpha, tail, ldj, tail, ldj, T(0),
              p + full * stride, ldp);
    }
  }
  la.reduce_upper(n, plan.blocks, workspace, ldp, stride, beta, c);
}

template void split_k_syrk_ata<float>(LinearAlgebra<float>&, const SplitKPlan&, float, const float*,
                                      std::size_t, float, float*, float*);
template void split_k_syrk_ata<double>(LinearAlgebra<double>&, const SplitKPlan&, double,
                                       const double*, std::size_t, double, double*, double*);

}  // namespace lmtrain
