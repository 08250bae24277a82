// The linear system of one LM step, built slice by slice:
//   primal  A = Σₛ JₛᵀJₛ (SYRK, upper triangle), g = Σₛ Jₛᵀrₛ
//   stored  J and r kept whole (for the dual form δ = Jᵀ(JJᵀ + λI)⁻¹r, or matrix-free CG), and
//           g = Jᵀr
// With several ranks, each builds the equations of its shard and the LM step sums them.
// A retry of the step never rebuilds any of it.
//
// Mixed precision: the Jacobian is built in the model's precision T and the system is held in S
// (float32 J, float64 A, g and solve).  Each slice is widened on S's backend before its SYRK —
// whole, or in blocks of SlicePreference::widening_rows rows where the device asks for them —, so
// A is the exact-product, double-accumulated JᵀJ of the float J: its rounding no longer limits
// how small λ can go before the factorization fails.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "lmtrain/core/timer.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/linearization_source.h"

namespace lmtrain {

template <typename T>
struct NormalEquations {
  std::size_t n = 0;             // parameters
  std::size_t m = 0;             // residual rows of the current batch
  bool jacobian_stored = false;  // J and r stored instead of A (dual form, CG)
  double objective = 0;          // F at the linearization point
  // Weight decay ρ of a stored-J or distributed system: the operator is JᵀJ + ρI (+ λD).  With A
  // formed on this rank, ρ is added to A itself and this stays 0.
  double shift = 0;
  DeviceBuffer<T> a;  // n × n, upper triangle (primal)
  // distributed_cholesky: A lives on the ranks' process grid instead of in `a` (which stays
  // empty); the builder accumulates into it and `a_diagonal` holds A's diagonal on every rank
  // (the damping and the finiteness check read it).  Set by the step; null otherwise.
  dist::DistributedNormalMatrix<T>* distributed = nullptr;
  DeviceBuffer<T> a_diagonal;
  DeviceBuffer<T> g;  // n: Jᵀr
  DeviceBuffer<T> j;  // m × n (jacobian_stored)
  DeviceBuffer<T> r;  // m (jacobian_stored)
};

template <typename T, typename S = T>
class NormalEquationsBuilder {
 public:
  // `slice_samples` comes from the memory plan; `max_batch` sizes the dual form's J.
  // `store_jacobian`: keep J and r (dual form, CG) instead of forming A.  `system` is the backend
  // of precision S on the source's device (the source's own when S = T).
  NormalEquationsBuilder(LinearizationSource<T>& source, LinearAlgebra<S>& system,
                         std::size_t slice_samples, std::size_t max_batch, bool store_jacobian);
  // One precision: the system lives on the source's backend.  (A template, so that the explicit
  // instantiation of the mixed-precision class does not instantiate it.)
  template <typename U = S>
  requires std::is_same_v<T, U> NormalEquationsBuilder(LinearizationSource<T>& source,
                                                       std::size_t slice_samples,
                                                       std::size_t max_batch, bool store_jacobian)
      : NormalEquationsBuilder(source, source.model_backend(), slice_samples, max_batch,
                               store_jacobian) {}

  // Linearizes at `params` on a batch and fills `ne`.  F is left at `objective` (a device double)
  // and nullopt returned when the source leaves it on the device
  // (LinearizationSource::linearize_into), else returned; with `objective` null it is read back
  // and returned.  The phases are marked on the clocks of the model's queue (forward, Jacobian)
  // and the system's (SYRK, GEMV), which are one and the same when S = T; nothing waits for the
  // device beyond that read.
  std::optional<double> build(const T* params, const T* x, const T* y, std::size_t batch,
                              NormalEquations<S>& ne, PhaseClock& model_clock,
                              PhaseClock& system_clock, double* objective);
  // The same, timed into `times` and finished on the device when it returns.
  double build(const T* params, const T* x, const T* y, std::size_t batch, NormalEquations<S>& ne,
               PhaseTimes& times);

  std::size_t slice_samples() const { return slice_samples_; }

  // The slicing the builder takes from `source` (the memory plan's too): the device's
  // (LinearizationSource::slice_preference); for a source that lends its own rows, their stride
  // as it comes and the device's widening blocks only.
  static SlicePreference preference_of(const LinearizationSource<T>& source) {
    const SlicePreference device = source.slice_preference();
    if (!source.borrows_slices()) return device;
    SlicePreference lent;
    lent.widening_rows = device.widening_rows;
    lent.widening_rows_smallest = device.widening_rows_smallest;
    return lent;
  }
  // Elements it allocates, for the memory plan, with n parameters, up to `max_residuals` rows per
  // batch and R rows per sample: A and g (or the stored J, r and g), in mixed precision the
  // batch's residuals widened and, with A formed on this rank from widening blocks, one block's
  // widened rows; per slice sample the Jacobian rows as built (T) and, in mixed precision with A
  // formed from whole slices, their widened copy (S: slice_sample_system_elements).
  // `preference`: the device's slicing (preference_of); where the padding takes part in SYRK, A
  // is summed in an ld × ld buffer and copied to ne.a.
  // `a_formed`: false when A is distributed (distributed_normal_matrix.h counts its share; the
  // ranks' passes take whole slices).
  static std::size_t system_elements(std::size_t n, std::size_t max_residuals, bool store_jacobian,
                                     const SlicePreference& preference, bool a_formed = true) {
    const std::size_t padded = padded_normal_matrix(n, preference, store_jacobian);
    const std::size_t widening_block = widens_in_blocks(store_jacobian, preference, a_formed)
                                           ? std::min(max_residuals, preference.widening_rows) *
                                                 leading_dimension(n, preference, store_jacobian)
                                           : 0;
    return (store_jacobian ? max_residuals * n + max_residuals + n : (a_formed ? n * n : 0) + n) +
           (kWiden ? max_residuals : 0) + padded * padded + widening_block;
  }
  // `borrowed`: the source hands over its own slices (LinearizationSource::borrows_slices), so
  // the builder keeps no scratch for them.
  static std::size_t slice_sample_model_elements(std::size_t ld, std::size_t residuals_per_sample,
                                                 bool store_jacobian, bool borrowed = false) {
    return borrowed || (store_jacobian && !kWiden) ? 0 : residuals_per_sample * ld;
  }
  static std::size_t slice_sample_system_elements(std::size_t ld, std::size_t residuals_per_sample,
                                                  bool store_jacobian,
                                                  const SlicePreference& preference,
                                                  bool a_formed = true) {
    return kWiden && !store_jacobian && !widens_in_blocks(store_jacobian, preference, a_formed)
               ? residuals_per_sample * ld
               : 0;
  }
  // Whether a mixed-precision slice is widened a block of preference.widening_rows rows at a time
  // (A formed on this rank, the device asking for blocks) rather than whole.
  static bool widens_in_blocks(bool store_jacobian, const SlicePreference& preference,
                               bool a_formed) {
    return kWiden && !store_jacobian && a_formed && preference.widening_rows > 0;
  }
  // The widening blocks measured for a slice of `rows` rows (SlicePreference::
  // widening_rows_smallest): smallest, 4×, 16×, … below `largest`, then `largest`, each at most
  // `rows`, ascending without repeats.  One block (`largest` or the slice) when smallest is 0 or
  // not below largest.
  static std::vector<std::size_t> widening_candidates(std::size_t smallest, std::size_t largest,
                                                      std::size_t rows) {
    std::vector<std::size_t> out;
    const auto add = [&](std::size_t b) {
      b = std::min(b, rows);
      if (b > 0 && (out.empty() || out.back() < b)) out.push_back(b);
    };
    if (smallest > 0)
      for (std::size_t b = smallest; b < largest; b *= 4) add(b);
    add(largest);
    return out;
  }
  // How mixed precision widened A's rows, when the block was measured (widening_candidates has
  // several for the first slice): the block chosen and each candidate's time.  Empty otherwise.
  const std::string& widening_report() const { return widening_report_; }
  // A slice whose pass in the smallest block takes longer than this is not timed in the others
  // (choose_widening): 50 ms by default, where the measurement's 3 + 4·(blocks − 1) passes cost
  // under a second; W5's n = 11 101 and 30 771 (whose mixed steps took 0.4 and 1.9 s on the
  // H200) keep their smallest blocks unmeasured.
  // Tests set 0 (never measure) or ∞.
  void set_widening_measure_limit(double seconds) { widening_measure_limit_ = seconds; }
  // The rows widened at a time now: the block measured, or the largest until then.
  std::size_t widening_block_rows() const { return block_rows_ > 0 ? block_rows_ : widening_rows_; }
  // The slice's row stride for n parameters: the model backend's preference
  // (SlicePreference::leading_dimension), else n (stored J, or a widened float64 system where the
  // padding would be SYRK's columns).
  static std::size_t leading_dimension(std::size_t n, const SlicePreference& preference,
                                       bool store_jacobian) {
    if (store_jacobian || (kWiden && preference.syrk_on_padding)) return n;
    return std::max(n, preference.leading_dimension);
  }
  // The side of the buffer A is summed in before ne.a when the padding takes part in SYRK
  // (SlicePreference::syrk_on_padding); 0 when A is summed in ne.a itself.
  static std::size_t padded_normal_matrix(std::size_t n, const SlicePreference& preference,
                                          bool store_jacobian) {
    const std::size_t ld = leading_dimension(n, preference, store_jacobian);
    return ld > n && preference.syrk_on_padding ? ld : 0;
  }
  // out = Jᵀu for the batch of the last build (u: batch·R values in T on the model's backend,
  // out: n values in S).  Reads J where it still is — the stored J, or the slice when the batch
  // fitted one —, else asks the source for its own product (a reverse pass), and otherwise
  // builds the slices again (no SYRK).
  void jacobian_transpose_times(const T* params, const T* u, const NormalEquations<S>& ne, S* out);
  // Where jacobian_transpose_times is one GEMV on a J held in memory in the model's precision
  // (the stored J, or the slice that held the batch), the J it reads, for a recording of it
  // (LinearizationSource::evaluation_key's sense); nullopt where it would widen, ask the source or
  // build slices again — work whose buffers a key of this size does not cover.
  std::optional<std::vector<std::uintptr_t>> transpose_product_key(
      const NormalEquations<S>& ne) const {
    if (kWiden || source_.batch() == 0) return std::nullopt;
    if (store_jacobian_) return std::vector<std::uintptr_t>{1, address_key(ne.j.data())};
    if (slice_holds_batch_ && held_in_system_)
      return std::vector<std::uintptr_t>{2, address_key(held_system_.data), held_system_.ld};
    return std::nullopt;
  }
  LinearizationSource<T>& source() { return source_; }

 private:
  static constexpr bool kWiden = !std::is_same_v<T, S>;
  // The distributed path of build(): each slice into the ranks' A (the same number of passes on
  // every rank), g = Jᵀr of the rank's rows.
  void build_distributed(const T* params, std::size_t batch, NormalEquations<S>& ne, const S* r,
                         PhaseClock& model_clock, PhaseClock& system_clock);
  // The stored-J path of build(): J (and r) kept whole, g = Jᵀr.
  void build_stored(const T* params, std::size_t batch, NormalEquations<S>& ne, const S* r,
                    PhaseClock& model_clock, PhaseClock& system_clock);
  // Rows of units [first, first + count) from the source: into slice_ (row stride ld_) or its
  // own storage.
  JacobianRows<T> slice(const T* params, std::size_t first, std::size_t count);
  // slice() timed as the Jacobian phase, ordered after the system queue's last read of slice_
  // (mixed precision widens on that queue): how build()'s loops take each slice.
  JacobianRows<T> timed_slice(const T* params, std::size_t first, std::size_t count,
                              PhaseClock& model_clock);
  // The m rows of a slice in S, handed to fn(rows, first row, row count): the source's rows at
  // once (one precision), else widened into wide_slice_ — whole, or `block_rows` at a time, each
  // block's fn queued before the next block overwrites it (mixed precision).
  template <typename F>
  void in_system_precision(const JacobianRows<T>& rows, std::size_t m, std::size_t block_rows,
                           F&& fn);
  // A slice's `rows` rows (r: their residuals in S) into A and g, widened `block_rows` at a time
  // (mixed precision); β = 0 for the batch's first slice (`first_slice`), else summed on.
  void sum_slice(const JacobianRows<T>& built, std::size_t rows, std::size_t block_rows, const S* r,
                 bool first_slice, NormalEquations<S>& ne);
  // block_rows_ for the batch's first slice: each widening_candidates block timed over the whole
  // slice (median_queue_seconds: a warm-up pass each, then kWideningRepeats alternated passes on
  // the system's clock), the fastest kept.  Each pass leaves A and g of the slice complete;
  // build() then sums the slice once more with the block chosen.  Where the smallest block's first
  // pass takes longer than widening_measure_limit_, that block is kept unmeasured and its pass
  // stands: true (the slice is summed).
  bool choose_widening(const JacobianRows<T>& built, std::size_t rows, const S* r,
                       NormalEquations<S>& ne);
  static constexpr int kWideningRepeats = 3;
  // Keeps a slice's rows for jacobian_transpose_times: as built, and in S (`whole`: all of them
  // are still in `system`).
  void hold(const JacobianRows<T>& built, const JacobianRows<S>& system, bool whole) {
    held_ = built;
    held_system_ = system;
    held_in_system_ = whole;
  }
  LinearizationSource<T>& source_;
  LinearAlgebra<T>& backend_;
  LinearAlgebra<S>& system_;
  std::size_t slice_samples_;
  std::size_t max_batch_;
  bool store_jacobian_;
  std::size_t ld_;             // the slice's row stride (≥ n)
  std::size_t padded_a_side_;  // ld_ when A is summed in padded_a_ (padded_normal_matrix), else 0
  std::size_t widening_rows_;  // the most rows widened at a time when A is formed here (mixed
                               // precision): wide_slice_'s, the plan's block
  std::size_t widening_rows_smallest_;  // SlicePreference::widening_rows_smallest
  std::size_t block_rows_ = 0;          // the block measured (0: not yet; widening_rows_ then)
  std::string widening_report_;
  double widening_measure_limit_ = 0.05;
  DeviceBuffer<T> slice_;
  DeviceBuffer<S> padded_a_;        // padded_a_side_² when set: SYRK's output before ne.a
  DeviceBuffer<S> wide_slice_;      // the slice, or a block of it, in S (mixed precision only)
  DeviceBuffer<S> wide_r_;          // the batch's residuals in S (mixed precision only)
  DeviceBuffer<S> wide_u_;          // jacobian_transpose_times' u in S (mixed precision only)
  DeviceBuffer<T> source_product_;  // the source's own Jᵀu in T (mixed precision only)
  bool slice_holds_batch_ = false;  // the last build's batch fitted one slice, still in held_
  JacobianRows<T> held_;            // that slice as built
  bool held_in_system_ = false;  // …and all of it still in held_system_ (no block overwrote it)
  JacobianRows<S> held_system_;  // that slice in S
};

}  // namespace lmtrain
