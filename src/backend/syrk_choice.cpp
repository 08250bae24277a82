#include "lmtrain/backend/syrk_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

double mib(std::size_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

std::string ms(double seconds) {
  return fmt::format("{:.3g} ms", 1e3 * seconds);
}

// A plan's name in the report: split-K, or GEMM panels where K is not split (panel_candidates).
std::string way(const SplitKPlan& plan) {
  return plan.blocks == 1 ? "GEMM panels" : "split-K";
}

}  // namespace

template <typename T>
SyrkChoice<T>::SyrkChoice(LinearAlgebra<T>& la, std::size_t multiprocessors,
                          std::size_t stride_multiple, Syrk syrk)
    : la_(la),
      multiprocessors_(multiprocessors),
      stride_multiple_(stride_multiple),
      syrk_(std::move(syrk)) {}

template <typename T>
void SyrkChoice<T>::syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj,
                             T beta, T* c) {
  const Shape shape{n, k, ldj};
  auto it = decisions_.find(shape);
  if (it == decisions_.end()) {
    Decision d = decide(n, k, j, ldj);
    d.order = decisions_.size();
    it = decisions_.emplace(shape, std::move(d)).first;
  }
  if (!it->second.plan) {
    syrk_(n, k, alpha, j, ldj, beta, c);
    return;
  }
  workspace_.reserve(la_.memory(), it->second.plan->workspace_elements());
  split_k_syrk_ata(la_, *it->second.plan, alpha, j, ldj, beta, c, workspace_.data());
}

template <typename T>
void SyrkChoice<T>::set_method(NormalMatrixMethod method) {
  if (method != method_) forget();
  method_ = method;
}

template <typename T>
typename SyrkChoice<T>::Decision SyrkChoice<T>::decide(std::size_t n, std::size_t k, const T* j,
                                                       std::size_t ldj) {
  switch (method_) {
    case NormalMatrixMethod::kSyrk:
      return {std::nullopt, "SYRK: SolverOptions::normal_matrix = \"syrk\""};
    case NormalMatrixMethod::kSplitK:
      return split_k_as_asked(n, k);
    case NormalMatrixMethod::kAuto:
      break;
  }
  return measure(n, k, j, ldj);
}

// solver.normal_matrix = "split_k": one panel, J's rows in as many blocks as the device's
// multiprocessors want (plan_split_k; at least two), without a measurement; SYRK where the rows
// are too few to split or the partials cannot be had.
template <typename T>
typename SyrkChoice<T>::Decision SyrkChoice<T>::split_k_as_asked(std::size_t n, std::size_t k) {
  SplitKPlan plan = plan_split_k(n, k, 1, multiprocessors_, stride_multiple_);
  if (plan.blocks < 2 && k >= 2 * std::max(n, kSplitKMinBlockRows)) {
    // A that fills the device alone: the plan wants one block; asked for split-K, take two.
    plan.block_rows = (k + 1) / 2;
    plan.blocks = 2;
  }
  if (plan.blocks < 2)
    return {std::nullopt,
            fmt::format("SYRK: SolverOptions::normal_matrix = \"split_k\", but {} rows are "
                        "too few to split (a block needs at least {})",
                        k, std::max(n, kSplitKMinBlockRows))};
  const std::size_t bytes = plan.workspace_elements() * sizeof(T);
  try {
    workspace_.reserve(la_.memory(), plan.workspace_elements());
  } catch (const OutOfMemory& e) {
    return {std::nullopt, fmt::format("SYRK: split-K's {:.1f} MiB could not be allocated ({})",
                                      mib(bytes), e.what())};
  }
  return {plan,
          fmt::format("split-K, {}: SolverOptions::normal_matrix = \"split_k\"", plan.describe())};
}

template <typename T>
typename SyrkChoice<T>::Decision SyrkChoice<T>::measure(std::size_t n, std::size_t k, const T* j,
                                                        std::size_t ldj) {
  std::vector<SplitKPlan> plans = split_k_candidates(n, k, multiprocessors_, stride_multiple_);
  // A float64 A that fills the device alone: GEMM panels against DSYRK (panel_candidates says
  // why only float64: SSYRK already ran at SGEMM's rate there, and timing costs a few products).
  if (plans.empty() && std::is_same_v<T, double>)
    plans = panel_candidates(n, k, multiprocessors_, stride_multiple_);
  const std::size_t tiles = (n + kSplitKTile - 1) / kSplitKTile;
  if (plans.empty()) {
    if (tiles * tiles >= kSplitKWaves * multiprocessors_)
      return {std::nullopt,
              fmt::format("SYRK: A's {} tiles of {}² fill {} waves of the {} multiprocessors "
                          "without splitting J's rows",
                          tiles * tiles, kSplitKTile, kSplitKWaves, multiprocessors_)};
    return {std::nullopt,
            fmt::format("SYRK: {} rows are too few to split (a block needs at least {})", k,
                        std::max(n, kSplitKMinBlockRows))};
  }
  // What the measurement needs: the largest plan's partials and one n × n scratch output.
  std::size_t largest = 0;
  for (const SplitKPlan& p : plans) largest = std::max(largest, p.workspace_elements());
  const std::size_t bytes = (largest + n * n) * sizeof(T);
  const std::size_t free = la_.available_memory_bytes();
  if (bytes > free / 4)
    return {std::nullopt,
            fmt::format("SYRK: split-K's partials and scratch ({:.1f} MiB) exceed a quarter of "
                        "the device's free memory ({:.1f} MiB)",
                        mib(bytes), mib(free))};
  std::vector<double> seconds;
  try {
    workspace_.reserve(la_.memory(), largest);
    DeviceBuffer<T> scratch = la_.allocate(n * n);
    seconds = time_ways(plans, n, k, j, ldj, scratch.data());
  } catch (const OutOfMemory& e) {
    return {std::nullopt, fmt::format("SYRK: split-K's {:.1f} MiB could not be allocated ({})",
                                      mib(bytes), e.what())};
  }
  const std::size_t best =
      static_cast<std::size_t>(std::min_element(seconds.begin(), seconds.end()) - seconds.begin());
  std::string others;
  for (std::size_t w = 0; w < seconds.size(); ++w) {
    if (w == best) continue;
    others += fmt::format(
        "{}{} {}", others.empty() ? "" : ", ",
        w == 0 ? std::string("SYRK") : way(plans[w - 1]) + " " + plans[w - 1].describe(),
        ms(seconds[w]));
  }
  const std::string timed =
      fmt::format("median of {} on the first call of the shape; against {}", kRepeats, others);
  if (best == 0) return {std::nullopt, fmt::format("SYRK {} ({})", ms(seconds[0]), timed)};
  const SplitKPlan& plan = plans[best - 1];
  return {plan,
          fmt::format("{}, {}: {} ({})", way(plan), plan.describe(), ms(seconds[best]), timed)};
}

template <typename T>
std::vector<double> SyrkChoice<T>::time_ways(const std::vector<SplitKPlan>& plans, std::size_t n,
                                             std::size_t k, const T* j, std::size_t ldj,
                                             T* scratch) {
  return median_queue_seconds(la_, plans.size() + 1, kRepeats, [&](std::size_t w) {
    if (w == 0)
      syrk_(n, k, T(1), j, ldj, T(0), scratch);
    else
      split_k_syrk_ata(la_, plans[w - 1], T(1), j, ldj, T(0), scratch, workspace_.data());
  });
}

template <typename T>
std::string SyrkChoice<T>::report() const {
  std::vector<std::pair<std::size_t, std::string>> lines;
  for (const auto& [shape, d] : decisions_) {
    const auto [n, k, ldj] = shape;
    lines.emplace_back(d.order,
                       fmt::format("A = JᵀJ, n = {}, {} rows{}: {}", n, k,
                                   ldj > n ? fmt::format(" (row stride {})", ldj) : "", d.why));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& [order, line] : lines) out += (out.empty() ? "" : "\n") + line;
  return out;
}

template class SyrkChoice<float>;
template class SyrkChoice<double>;

}  // namespace lmtrain
