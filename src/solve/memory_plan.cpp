#include "lmtrain/solve/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "lmtrain/core/error.h"

namespace lmtrain {

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

MemoryPlan plan_memory(const MemoryPlanInput& in) {
  MemoryPlan plan;
  plan.budget_bytes = in.budget_bytes;
  plan.budget_source = in.budget_source;
  plan.fixed_bytes = in.fixed_bytes;
  plan.normal_matrix_bytes = in.normal_matrix_bytes;
  plan.bytes_per_slice_sample = in.bytes_per_slice_sample;
  if (in.fixed_bytes + in.bytes_per_slice_sample > in.budget_bytes)
    throw MemoryPlanError(fmt::format(
        "the problem does not fit the memory budget of {}{}: {} parameters need {} for the "
        "normal matrix ({}) plus {} of other fixed buffers (batch of {} samples), before a "
        "single Jacobian row ({} per sample). Ways out: raise the budget "
        "(SolverOptions::memory_budget_bytes, or SolverOptions::memory_fraction of available "
        "memory), lower the batch size, or use fewer parameters{}",
        format_bytes(in.budget_bytes),
        in.budget_source.empty() ? std::string() : fmt::format(" ({})", in.budget_source),
        in.num_params, format_bytes(in.normal_matrix_bytes), in.normal_matrix_name,
        format_bytes(in.fixed_bytes - in.normal_matrix_bytes), in.batch,
        format_bytes(in.bytes_per_slice_sample), in.way_out));
  std::size_t slice =
      (in.budget_bytes - in.fixed_bytes) / std::max<std::size_t>(in.bytes_per_slice_sample, 1);
  auto limit = [&](std::size_t cap, MemoryPlan::Limit why) {
    if (cap >= slice) return;
    slice = cap;
    plan.slice_limit = why;
  };
  limit(in.batch, MemoryPlan::Limit::kBatch);
  if (in.preferred_slice_bytes > 0)
    limit(std::max(in.preferred_slice_bytes / std::max<std::size_t>(in.bytes_per_slice_sample, 1),
                   in.min_slice_samples),
          MemoryPlan::Limit::kCache);
  if (in.max_slice_samples > 0) limit(in.max_slice_samples, MemoryPlan::Limit::kCap);
  slice = std::max<std::size_t>(slice, 1);
  plan.slice_samples = slice;
  plan.slices_per_batch = (in.batch + slice - 1) / slice;
  plan.peak_bytes = in.fixed_bytes + slice * in.bytes_per_slice_sample;
  return plan;
}

std::string MemoryPlan::describe() const {
  const char* why = slice_limit == Limit::kBatch   ? "the whole batch"
                    : slice_limit == Limit::kCache ? "sized for the CPU's cache"
                    : slice_limit == Limit::kCap   ? "max_slice_samples"
                                                   : "the most the budget allows";
  return fmt::format(
      "budget {}{}, normal matrix {}, fixed {}, {} per slice sample, slice of {} samples "
      "({}; {} per batch), planned peak {}",
      format_bytes(budget_bytes),
      budget_source.empty() ? std::string() : fmt::format(" ({})", budget_source),
      format_bytes(normal_matrix_bytes), format_bytes(fixed_bytes),
      format_bytes(bytes_per_slice_sample), slice_samples, why, slices_per_batch,
      format_bytes(peak_bytes));
}

}  // namespace lmtrain
