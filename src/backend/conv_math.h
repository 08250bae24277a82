// Per-element formulas of im2col, col2im and 2-D pooling, shared by the CPU and CUDA kernels so
// both backends compute the same thing (compiled as __host__ __device__ under nvcc).  Every
// adjoint is written as a *gather* — one output element sums what maps onto it — so neither
// backend needs atomics and results do not depend on thread scheduling.
//
// Layout (backend.h): a sample is C × H × W row-major; im2col of a sample is K × P row-major with
// K = C·kh·kw (row (c·kh + i)·kw + j) and P = Ho·Wo (column oy·Wo + ox); input pixel of window
// (oy, ox) at kernel offset (i, j) is (oy·sh − ph + i, ox·sw − pw + j).
#pragma once

#include <cstddef>

#include "lmtrain/core/image_shape.h"

#if !defined(LMTRAIN_HD)
#if defined(__CUDACC__)
#define LMTRAIN_HD __host__ __device__ inline
#else
#define LMTRAIN_HD inline
#endif
#endif

namespace lmtrain::kernels {

// Range [first, last] of window positions along one axis whose window covers input coordinate
// `pos` (empty when first > last): o·stride − pad ≤ pos ≤ o·stride − pad + kernel − 1.
struct CoveringRange {
  std::size_t first;
  std::size_t last;
};

LMTRAIN_HD CoveringRange covering_windows(std::size_t pos, std::size_t pad, std::size_t kernel,
                                          std::size_t stride, std::size_t out) {
  const std::size_t p = pos + pad;  // coordinate in the padded input
  const std::size_t first = p + 1 > kernel ? (p + 1 - kernel + stride - 1) / stride : 0;
  std::size_t last = p / stride;
  if (last > out - 1) last = out - 1;
  return {first, last};
}

// Input coordinate of window `o` at kernel offset `k`, or false when it falls in the padding.
LMTRAIN_HD bool input_coordinate(std::size_t o, std::size_t k, std::size_t stride, std::size_t pad,
                                 std::size_t extent, std::size_t* pos) {
  const std::size_t p = o * stride + k;  // padded coordinate
  if (p < pad || p - pad >= extent) return false;
  *pos = p - pad;
  return true;
}

// cols[(c·kh + i)·kw + j, oy·Wo + ox] of one sample x (C × H × W).
template <typename T>
LMTRAIN_HD T im2col_entry(const WindowGeometry& g, const T* x, std::size_t c, std::size_t i,
                          std::size_t j, std::size_t oy, std::size_t ox) {
  std::size_t y = 0, xx = 0;
  if (!input_coordinate(oy, i, g.stride_h, g.pad_h, g.height, &y) ||
      !input_coordinate(ox, j, g.stride_w, g.pad_w, g.width, &xx))
    return T(0);
  return x[(c * g.height + y) * g.width + xx];
}

// The adjoint of im2col at input pixel (c, y, x) of one sample: the sum of the column entries
// (K × P, as above) that im2col copies from that pixel.
template <typename T>
LMTRAIN_HD T col2im_entry(const WindowGeometry& g, const T* cols, std::size_t c, std::size_t y,
                          std::size_t x) {
  const std::size_t spatial = g.out_height * g.out_width;
  const CoveringRange ry = covering_windows(y, g.pad_h, g.kernel_h, g.stride_h, g.out_height);
  const CoveringRange rx = covering_windows(x, g.pad_w, g.kernel_w, g.stride_w, g.out_width);
  T sum = T(0);
  for (std::size_t oy = ry.first; oy <= ry.last; ++oy) {
    const std::size_t i = y + g.pad_h - oy * g.stride_h;
    for (std::size_t ox = rx.first; ox <= rx.last; ++ox) {
      const std::size_t j = x + g.pad_w - ox * g.stride_w;
      sum += cols[((c * g.kernel_h + i) * g.kernel_w + j) * spatial + oy * g.out_width + ox];
    }
  }
  return sum;
}

// Maximum over window (oy, ox) of channel c of one sample; *index receives the flat index
// (c·H + y)·W + x of the first maximum.  Padding is −∞ (never selected), as in PyTorch.
template <typename T>
LMTRAIN_HD T max_pool_entry(const WindowGeometry& g, const T* x, std::size_t c, std::size_t oy,
                            std::size_t ox, std::size_t* index) {
  bool found = false;
  T best = T(0);
  std::size_t best_index = 0;
  for (std::size_t i = 0; i < g.kernel_h; ++i) {
    std::size_t y = 0;
    if (!input_coordinate(oy, i, g.stride_h, g.pad_h, g.height, &y)) continue;
    for (std::size_t j = 0; j < g.kernel_w; ++j) {
      std::size_t xx = 0;
      if (!input_coordinate(ox, j, g.stride_w, g.pad_w, g.width, &xx)) continue;
      const std::size_t k = (c * g.height + y) * g.width + xx;
      const T v = x[k];
      if (!found || v > best) {
        best = v;
        best_index = k;
        found = true;
      }
    }
  }
  *index = best_index;
  return best;
}

// Seed of input pixel (c, y, x): the sum of the output seeds whose window selected it.
// `argmax` and `g_out` are the sample's (C × Ho × Wo) saved indices and its row of seeds.
template <typename T>
LMTRAIN_HD T max_pool_backward_entry(const WindowGeometry& g, const T* argmax, const T* g_out,
                                     std::size_t c, std::size_t y, std::size_t x) {
  const CoveringRange ry = covering_windows(y, g.pad_h, g.kernel_h, g.stride_h, g.out_height);
  const CoveringRange rx = covering_windows(x, g.pad_w, g.kernel_w, g.stride_w, g.out_width);
  const std::size_t self = (c * g.height + y) * g.width + x;
  T sum = T(0);
  for (std::size_t oy = ry.first; oy <= ry.last; ++oy)
    for (std::size_t ox = rx.first; ox <= rx.last; ++ox) {
      const std::size_t o = (c * g.out_height + oy) * g.out_width + ox;
      if (static_cast<std::size_t>(argmax[o]) == self) sum += g_out[o];
    }
  return sum;
}

// Mean over window (oy, ox) of channel c, padding counted as zeros (PyTorch's default
// count_include_pad = True): the divisor is always kh·kw.
template <typename T>
LMTRAIN_HD T avg_pool_entry(const WindowGeometry& g, const T* x, std::size_t c, std::size_t oy,
                            std::size_t ox) {
  T sum = T(0);
  for (std::size_t i = 0; i < g.kernel_h; ++i) {
    std::size_t y = 0;
    if (!input_coordinate(oy, i, g.stride_h, g.pad_h, g.height, &y)) continue;
    for (std::size_t j = 0; j < g.kernel_w; ++j) {
      std::size_t xx = 0;
      if (!input_coordinate(ox, j, g.stride_w, g.pad_w, g.width, &xx)) continue;
      sum += x[(c * g.height + y) * g.width + xx];
    }
  }
  return sum / static_cast<T>(g.kernel_h * g.kernel_w);
}

// Seed of input pixel (c, y, x) of average pooling: Σ over covering windows of g_out / (kh·kw).
template <typename T>
LMTRAIN_HD T avg_pool_backward_entry(const WindowGeometry& g, const T* g_out, std::size_t c,
                                     std::size_t y, std::size_t x) {
  const CoveringRange ry = covering_windows(y, g.pad_h, g.kernel_h, g.stride_h, g.out_height);
  const CoveringRange rx = covering_windows(x, g.pad_w, g.kernel_w, g.stride_w, g.out_width);
  T sum = T(0);
  for (std::size_t oy = ry.first; oy <= ry.last; ++oy)
    for (std::size_t ox = rx.first; ox <= rx.last; ++ox)
      sum += g_out[(c * g.out_height + oy) * g.out_width + ox];
  return sum / static_cast<T>(g.kernel_h * g.kernel_w);
}

}  // namespace lmtrain::kernels
