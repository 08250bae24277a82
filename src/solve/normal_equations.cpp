#include "lmtrain/solve/normal_equations.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "lmtrain/core/error.h"

namespace lmtrain {

template <typename T, typename S>
NormalEquationsBuilder<T, S>::NormalEquationsBuilder(LinearizationSource<T>& source,
                                                     LinearAlgebra<S>& system,
                                                     std::size_t slice_samples,
                                                     std::size_t max_batch, bool store_jacobian)
    : source_(source),
      backend_(source.model_backend()),
      system_(system),
      slice_samples_(std::max<std::size_t>(1, slice_samples)),
      max_batch_(max_batch),
      store_jacobian_(store_jacobian),
      ld_(leading_dimension(source.num_params(), preference_of(source), store_jacobian)),
      padded_a_side_(
          padded_normal_matrix(source.num_params(), preference_of(source), store_jacobian)) {
  const std::size_t n = source_.num_params(), R = source_.residuals_per_sample();
  const SlicePreference preference = preference_of(source_);
  widening_rows_ = widens_in_blocks(store_jacobian_, preference, true)
                       ? std::min(slice_samples_ * R, preference.widening_rows)
                       : slice_samples_ * R;
  widening_rows_smallest_ =
      widens_in_blocks(store_jacobian_, preference, true) ? preference.widening_rows_smallest : 0;
  // Measured at the first slice that has a choice; until then the largest.  Where not even a
  // full slice has one (no smallest block, or a slice shorter than it), decided now: build()
  // then never looks again.
  if (widening_candidates(widening_rows_smallest_, widening_rows_, widening_rows_).size() < 2)
    block_rows_ = widening_rows_;
  source_.reserve(max_batch_, slice_samples_);
  // Stored J in T is written in place, except in mixed precision, where each slice is built here
  // and widened into the stored J.  A source that lends its own slices needs no scratch.
  if (!source_.borrows_slices() && (!store_jacobian_ || kWiden))
    slice_ = backend_.allocate(slice_samples_ * R * ld_);
  if (ld_ > n) {
    // The layers write columns 0 … n−1 of each row; the rest stay zero for SYRK and GEMV.
    backend_.fill(slice_.data(), slice_samples_ * R * ld_, T(0));
    if (padded_a_side_ > 0) padded_a_ = system_.allocate(padded_a_side_ * padded_a_side_);
  }
  if constexpr (kWiden) {
    // A distributed A takes whole slices: build_distributed() grows this buffer to one.
    if (!store_jacobian_) wide_slice_ = system_.allocate(widening_rows_ * ld_);
    wide_r_ = system_.allocate(max_batch_ * R);
  }
}

template <typename T, typename S>
double NormalEquationsBuilder<T, S>::build(const T* params, const T* x, const T* y,
                                           std::size_t batch, NormalEquations<S>& ne,
                                           PhaseTimes& times) {
  const std::unique_ptr<PhaseClock> model = backend_.make_phase_clock();
  const std::unique_ptr<PhaseClock> system = kWiden ? system_.make_phase_clock() : nullptr;
  const double objective =
      *build(params, x, y, batch, ne, *model, system ? *system : *model, nullptr);
  system_.synchronize();
  model->collect(times);
  if (system) system->collect(times);
  return objective;
}

template <typename T, typename S>
JacobianRows<T> NormalEquationsBuilder<T, S>::slice(const T* params, std::size_t first,
                                                    std::size_t count) {
  const JacobianRows<T> rows = source_.jacobian_slice(params, first, count, slice_.data(), ld_);
  if (rows.data == nullptr || rows.ld < source_.num_params() ||
      (ld_ > source_.num_params() && rows.data != slice_.data()))
    throw Error(
        "LinearizationSource::jacobian_slice returned no rows, a row stride below the parameter "
        "count, or its own rows although the builder pads the slice's columns");
  return rows;
}

template <typename T, typename S>
template <typename F>
void NormalEquationsBuilder<T, S>::in_system_precision(const JacobianRows<T>& rows, std::size_t m,
                                                       std::size_t block_rows, F&& fn) {
  if constexpr (kWiden) {
    const std::size_t n = source_.num_params();
    system_.order_after(backend_.native_stream());
    for (std::size_t first = 0; first < m; first += block_rows) {
      const std::size_t count = std::min(block_rows, m - first);
      const T* from = rows.data + first * rows.ld;
      if (rows.ld == ld_)  // the builder's own slice (or a source's rows of its stride): at once
        system_.convert(count * ld_, from, wide_slice_.data());
      else
        for (std::size_t r = 0; r < count; ++r)
          system_.convert(n, from + r * rows.ld, wide_slice_.data() + r * ld_);
      fn(JacobianRows<S>{wide_slice_.data(), ld_}, first, count);
    }
  } else {
    fn(rows, std::size_t{0}, m);
  }
}

template <typename T, typename S>
std::optional<double> NormalEquationsBuilder<T, S>::build(const T* params, const T* x, const T* y,
                                                          std::size_t batch, NormalEquations<S>& ne,
                                                          PhaseClock& model_clock,
                                                          PhaseClock& system_clock,
                                                          double* objective_on_device) {
  const std::size_t n = source_.num_params(), R = source_.residuals_per_sample();
  const std::size_t m = batch * R;
  ne.n = n;
  ne.m = m;
  ne.jacobian_stored = store_jacobian_;
  ne.shift = 0;
  ne.g.reserve(system_.memory(), n);
  if (store_jacobian_) {
    ne.j.reserve(system_.memory(), max_batch_ * R * n);
    ne.r.reserve(system_.memory(), max_batch_ * R);
  } else if (ne.distributed == nullptr) {
    // Only A's upper triangle is ever written; zero a fresh buffer once so the other triangle
    // holds defined values for anything that copies the whole matrix.
    const S* before = ne.a.data();
    ne.a.reserve(system_.memory(), n * n);
    if (ne.a.data() != before) system_.fill(ne.a.data(), n * n, S(0));
  }

  slice_holds_batch_ = false;
  if (batch == 0) {
    // A rank whose shard of this batch is empty contributes zeros to the sums (and takes part in
    // a distributed A's reduce-scatters all the same).
    source_.clear_batch();
    ne.objective = 0;
    system_.fill(ne.g.data(), n, S(0));
    if (ne.distributed != nullptr) {
      ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
      for (std::size_t p = ne.distributed->begin(0); p > 0; --p)
        ne.distributed->accumulate(nullptr, 0, n);
    } else if (!store_jacobian_) {
      system_.fill(ne.a.data(), n * n, S(0));
    }
    return 0.0;
  }
  std::optional<double> objective;
  {
    ScopedDevicePhase phase(model_clock, Phase::kForward);
    objective = objective_on_device != nullptr
                    ? source_.linearize_into(params, x, y, batch, objective_on_device)
                    : source_.linearize(params, x, y, batch);
  }
  if (objective) ne.objective = *objective;
  // The residuals in S: the source's own buffer, or widened once per batch.
  const S* r = nullptr;
  if constexpr (kWiden) {
    system_.order_after(backend_.native_stream());
    system_.convert(m, source_.residuals(), wide_r_.data());
    r = wide_r_.data();
  } else {
    r = source_.residuals();
  }
  if (store_jacobian_) {
    build_stored(params, batch, ne, r, model_clock, system_clock);
    return objective;
  }
  if (ne.distributed != nullptr) {
    build_distributed(params, batch, ne, r, model_clock, system_clock);
    return objective;
  }

  for (std::size_t first = 0; first < batch; first += slice_samples_) {
    const std::size_t count = std::min(slice_samples_, batch - first);
    const std::size_t rows = count * R;
    const JacobianRows<T> built = timed_slice(params, first, count, model_clock);
    ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
    // The first slice of the first batch with a choice of blocks chooses; it may leave the
    // slice summed already.
    const bool summed = first == 0 && block_rows_ == 0 && choose_widening(built, rows, r, ne);
    if (!summed) sum_slice(built, rows, widening_block_rows(), r + first * R, first == 0, ne);
  }
  slice_holds_batch_ = batch <= slice_samples_;
  if (padded_a_side_ > 0) {  // a CPU's float SYRK on few columns: n < 128 rows to copy
    ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
    for (std::size_t i = 0; i < n; ++i)  // A's upper triangle, row by row
      system_.copy(padded_a_.data() + i * padded_a_side_ + i, ne.a.data() + i * n + i, n - i);
  }
  return objective;
}

template <typename T, typename S>
void NormalEquationsBuilder<T, S>::sum_slice(const JacobianRows<T>& built, std::size_t rows,
                                             std::size_t block_rows, const S* r, bool first_slice,
                                             NormalEquations<S>& ne) {
  const std::size_t n = source_.num_params();
  in_system_precision(
      built, rows, block_rows, [&](const JacobianRows<S>& j, std::size_t row, std::size_t k) {
        const S beta = first_slice && row == 0 ? S(0) : S(1);
        if (padded_a_side_ > 0)
          system_.syrk_ata(padded_a_side_, k, S(1), j.data, j.ld, beta, padded_a_.data());
        else
          system_.syrk_ata(n, k, S(1), j.data, j.ld, beta, ne.a.data());
        system_.gemv(Trans::kYes, k, n, S(1), j.data, j.ld, r + row, beta, ne.g.data());
        hold(built, j, rows <= block_rows);
      });
}

template <typename T, typename S>
bool NormalEquationsBuilder<T, S>::choose_widening(const JacobianRows<T>& built, std::size_t rows,
                                                   const S* r, NormalEquations<S>& ne) {
  const std::vector<std::size_t> blocks =
      widening_candidates(widening_rows_smallest_, widening_rows_, rows);
  if (blocks.size() < 2) return false;  // a slice too short to choose: the next first slice may
  const auto pass = [&](std::size_t b) { sum_slice(built, rows, b, r, true, ne); };
  // The smallest block first (with SYRK's own first-call choices for its shapes).  A slice that
  // takes longer is large enough for its products to fill the device in any block, and every
  // further pass would cost as much: keep that block, whose pass has just summed the slice.
  const std::unique_ptr<PhaseClock> clock = system_.make_phase_clock();
  const double first = queue_seconds(system_, *clock, [&] { pass(blocks.front()); });
  if (first > widening_measure_limit_) {
    block_rows_ = blocks.front();
    widening_report_ = fmt::format(
        "mixed precision: J's rows widened to float64 in blocks of {} rows (slice of {}): {:.3g} "
        "ms a slice, over {:.3g} ms, so not timed against {} larger blocks",
        block_rows_, rows, 1e3 * first, 1e3 * widening_measure_limit_, blocks.size() - 1);
    return true;
  }
  const std::vector<double> medians = median_queue_seconds(system_, blocks.size(), kWideningRepeats,
                                                           [&](std::size_t c) { pass(blocks[c]); });
  // The first of equal times: the smaller block, the less memory traffic beyond L2.
  const std::size_t best =
      static_cast<std::size_t>(std::min_element(medians.begin(), medians.end()) - medians.begin());
  block_rows_ = blocks[best];
  std::string others;
  for (std::size_t c = 0; c < blocks.size(); ++c)
    if (c != best)
      others += fmt::format("{}{} rows {:.3g} ms", others.empty() ? "" : ", ", blocks[c],
                            1e3 * medians[c]);
  widening_report_ = fmt::format(
      "mixed precision: J's rows widened to float64 in blocks of {} rows (slice of {}): {:.3g} ms "
      "a slice (median of {} on the first slice; against {})",
      block_rows_, rows, 1e3 * medians[best], kWideningRepeats, others);
  return false;
}

template <typename T, typename S>
JacobianRows<T> NormalEquationsBuilder<T, S>::timed_slice(const T* params, std::size_t first,
                                                          std::size_t count,
                                                          PhaseClock& model_clock) {
  if constexpr (kWiden) backend_.order_after(system_.native_stream());
  ScopedDevicePhase phase(model_clock, Phase::kJacobian);
  return slice(params, first, count);
}

template <typename T, typename S>
void NormalEquationsBuilder<T, S>::build_distributed(const T* params, std::size_t batch,
                                                     NormalEquations<S>& ne, const S* r,
                                                     PhaseClock& model_clock,
                                                     PhaseClock& system_clock) {
  const std::size_t n = source_.num_params(), R = source_.residuals_per_sample();
  dist::DistributedNormalMatrix<S>& a = *ne.distributed;
  // Each pass hands the ranks a whole slice (a pass costs a reduce-scatter of every panel of A).
  // The constructor's block goes first: the plan counts a widened slice here, not both.
  if constexpr (kWiden) {
    if (wide_slice_.size() < slice_samples_ * R * ld_) {
      wide_slice_ = DeviceBuffer<S>();
      wide_slice_ = system_.allocate(slice_samples_ * R * ld_);
    }
  }
  std::size_t passes = 0;
  {
    ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
    passes = a.begin((batch + slice_samples_ - 1) / slice_samples_);
  }
  for (std::size_t p = 0; p < passes; ++p) {
    const std::size_t first = p * slice_samples_;
    if (first >= batch) {  // this rank's rows are all in; the others still send theirs
      ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
      a.accumulate(nullptr, 0, n);
      continue;
    }
    const std::size_t count = std::min(slice_samples_, batch - first);
    const std::size_t rows = count * R;
    const JacobianRows<T> built = timed_slice(params, first, count, model_clock);
    ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
    in_system_precision(built, rows, rows, [&](const JacobianRows<S>& j, std::size_t, std::size_t) {
      a.accumulate(j.data, rows, j.ld);
      system_.gemv(Trans::kYes, rows, n, S(1), j.data, j.ld, r + first * R,
                   first == 0 ? S(0) : S(1), ne.g.data());
      hold(built, j, true);
    });
  }
  slice_holds_batch_ = batch <= slice_samples_;
}

template <typename T, typename S>
void NormalEquationsBuilder<T, S>::build_stored(const T* params, std::size_t batch,
                                                NormalEquations<S>& ne, const S* r,
                                                PhaseClock& model_clock, PhaseClock& system_clock) {
  const std::size_t n = source_.num_params(), R = source_.residuals_per_sample();
  for (std::size_t first = 0; first < batch; first += slice_samples_) {
    const std::size_t count = std::min(slice_samples_, batch - first);
    const std::size_t m = count * R;
    S* rows = ne.j.data() + first * R * n;
    // The source's rows into the stored J: widened (mixed precision) or copied when the source
    // lent its own, in one call when they are contiguous.
    const auto store = [&](const auto* data, std::size_t ld, auto&& move) {
      if (ld == n)
        move(data, rows, m * n);
      else
        for (std::size_t k = 0; k < m; ++k) move(data + k * ld, rows + k * n, n);
    };
    if constexpr (kWiden) {
      backend_.order_after(system_.native_stream());  // the last widening read slice_
      JacobianRows<T> built;
      {
        ScopedDevicePhase phase(model_clock, Phase::kJacobian);
        built = source_.jacobian_slice(params, first, count, slice_.data(), n);
      }
      system_.order_after(backend_.native_stream());
      store(built.data, built.ld,
            [&](const T* from, S* to, std::size_t k) { system_.convert(k, from, to); });
    } else {
      ScopedDevicePhase phase(model_clock, Phase::kJacobian);
      const JacobianRows<T> built = source_.jacobian_slice(params, first, count, rows, n);
      if (built.data != rows)
        store(built.data, built.ld,
              [&](const T* from, S* to, std::size_t k) { system_.copy(from, to, k); });
    }
  }
  ScopedDevicePhase phase(system_clock, Phase::kNormalEquations);
  system_.copy(r, ne.r.data(), batch * R);
  system_.gemv(Trans::kYes, batch * R, n, S(1), ne.j.data(), n, r, S(0), ne.g.data());
}

template <typename T, typename S>
void NormalEquationsBuilder<T, S>::jacobian_transpose_times(const T* params, const T* u,
                                                            const NormalEquations<S>& ne, S* out) {
  const std::size_t n = source_.num_params(), R = source_.residuals_per_sample();
  const std::size_t batch = source_.batch(), m = batch * R;
  if (batch == 0) {
    system_.fill(out, n, S(0));
    return;
  }
  const S* us = nullptr;
  if constexpr (kWiden) {
    wide_u_.reserve(system_.memory(), max_batch_ * R);
    system_.order_after(backend_.native_stream());  // u was written on the model's queue
    system_.convert(m, u, wide_u_.data());
    us = wide_u_.data();
  } else {
    us = u;
  }
  if (store_jacobian_) {
    system_.gemv(Trans::kYes, m, n, S(1), ne.j.data(), n, us, S(0), out);
    return;
  }
  if (slice_holds_batch_ && held_in_system_) {
    system_.gemv(Trans::kYes, m, n, S(1), held_system_.data, held_system_.ld, us, S(0), out);
    return;
  }
  if (slice_holds_batch_) {  // widened again, block by block, from the slice as built
    in_system_precision(held_, m, widening_block_rows(),
                        [&](const JacobianRows<S>& j, std::size_t row, std::size_t k) {
                          system_.gemv(Trans::kYes, k, n, S(1), j.data, j.ld, us + row,
                                       row == 0 ? S(0) : S(1), out);
                        });
    if constexpr (kWiden) backend_.order_after(system_.native_stream());
    return;
  }
  if (source_.computes_transpose_product()) {
    if constexpr (kWiden) {
      source_product_.reserve(backend_.memory(), n);
      if (source_.jacobian_transpose_times(params, u, source_product_.data())) {
        system_.order_after(backend_.native_stream());
        system_.convert(n, source_product_.data(), out);
        return;
      }
    } else {
      if (source_.jacobian_transpose_times(params, u, out)) return;
    }
  }
  for (std::size_t first = 0; first < batch; first += slice_samples_) {
    const std::size_t count = std::min(slice_samples_, batch - first);
    const std::size_t rows = count * R;
    if constexpr (kWiden) backend_.order_after(system_.native_stream());
    in_system_precision(slice(params, first, count), rows, widening_block_rows(),
                        [&](const JacobianRows<S>& j, std::size_t row, std::size_t k) {
                          system_.gemv(Trans::kYes, k, n, S(1), j.data, j.ld, us + first * R + row,
                                       first == 0 && row == 0 ? S(0) : S(1), out);
                        });
  }
  slice_holds_batch_ = false;
  if constexpr (kWiden) backend_.order_after(system_.native_stream());  // the last GEMV read slice_
}

template class NormalEquationsBuilder<float, float>;
template class NormalEquationsBuilder<double, double>;
template class NormalEquationsBuilder<float, double>;

}  // namespace lmtrain
