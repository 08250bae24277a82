// CPU convolution and pooling kernels (conv_kernels.h).  The index formulas live in
// backend/conv_math.h so the CUDA kernels compute exactly the same thing; here they run inside
// OpenMP loops over samples or (sample, channel) pairs, the natural units of independent work
// (im2col through a gather table built from the same formula).
#include <cblas.h>
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../conv_math.h"
#include "activation_loops.h"
#include "blas_calls.h"
#include "conv_kernels.h"
#include "conv_loops.h"

namespace lmtrain::cpu {
namespace {

// Below this many elements an OpenMP region costs more than it saves.
constexpr std::size_t kParallelThreshold = 1 << 14;
// A GEMM below this many multiply-adds gains nothing from OpenBLAS's own threads, so a batch of
// them is spread over OpenMP threads instead (OpenBLAS runs single-threaded inside a parallel
// region) — when the whole batch is worth a parallel region at all.
constexpr std::size_t kSmallGemm = 1 << 18;
constexpr std::size_t kParallelGemmWork = 1 << 17;
// The direct forward kernel (conv_loops.h) up to this many output channels; above, OpenBLAS's
// products are large enough to run near its GEMM rate.
constexpr std::size_t kDirectConvMaxOut = 32;

}  // namespace

template <typename T>
void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                          const T* a, std::size_t lda, std::size_t stride_a, const T* b,
                          std::size_t ldb, std::size_t stride_b, T beta, T* c, std::size_t ldc,
                          std::size_t stride_c, std::size_t count) {
  if (m == 0 || n == 0 || count == 0) return;
  const std::size_t work = m * n * k;
  const bool across_batch =
      count > 1 && count * work > kParallelGemmWork &&
      (count >= static_cast<std::size_t>(omp_get_max_threads()) || work <= kSmallGemm);
#pragma omp parallel for schedule(static) if (across_batch)
  for (std::size_t i = 0; i < count; ++i)
    blas_gemm(cblas_trans(ta), cblas_trans(tb), bi(m), bi(n), bi(k), alpha, a + i * stride_a,
              bi(lda), b + i * stride_b, bi(ldb), beta, c + i * stride_c, bi(ldc));
}

// im2col of one sample as a gather: column entry e of K × P reads input element index[e], or the
// zero padding when index[e] = in_size (the element-wise formula, kernels::im2col_entry, cost
// ~1 ns per entry on W4's 5 × 5 and 13 × 13 windows: 40% of its time).  col2im is its adjoint
// through the same table.
struct ColumnMap {
  std::vector<std::uint32_t> index;  // K·P entries
  std::size_t in = 0;                // input elements per sample
  bool padded = false;               // some entries read the padding
};

ColumnMap build_column_map(const WindowGeometry& g) {
  ColumnMap map{std::vector<std::uint32_t>(g.patch_size() * g.out_spatial()), g.in_size(),
                g.pad_h > 0 || g.pad_w > 0};
  std::size_t e = 0;
  for (std::size_t c = 0; c < g.channels; ++c)
    for (std::size_t i = 0; i < g.kernel_h; ++i)
      for (std::size_t j = 0; j < g.kernel_w; ++j)
        for (std::size_t oy = 0; oy < g.out_height; ++oy)
          for (std::size_t ox = 0; ox < g.out_width; ++ox, ++e) {
            std::size_t y = 0, x = 0;
            const bool inside =
                kernels::input_coordinate(oy, i, g.stride_h, g.pad_h, g.height, &y) &&
                kernels::input_coordinate(ox, j, g.stride_w, g.pad_w, g.width, &x);
            map.index[e] =
                static_cast<std::uint32_t>(inside ? (c * g.height + y) * g.width + x : map.in);
          }
  return map;
}

bool same_geometry(const WindowGeometry& a, const WindowGeometry& b) {
  return a.channels == b.channels && a.height == b.height && a.width == b.width &&
         a.kernel_h == b.kernel_h && a.kernel_w == b.kernel_w && a.stride_h == b.stride_h &&
         a.stride_w == b.stride_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w;
}

// The map of g, built once per geometry and thread: a convolution calls im2col and col2im once
// per chunk of samples, and W4's network has five geometries.  Read-only while a parallel loop
// uses it (only the calling thread adds entries, before the loop).
const ColumnMap& column_map(const WindowGeometry& g) {
  thread_local std::vector<std::pair<WindowGeometry, ColumnMap>> cache;
  for (const auto& [key, map] : cache)
    if (same_geometry(key, g)) return map;
  if (cache.size() >= 64) cache.clear();  // a process that keeps building new networks
  cache.emplace_back(g, build_column_map(g));
  return cache.back().second;
}

template <typename T>
void im2col(const WindowGeometry& g, std::size_t samples, const T* x, T* cols) {
  const ColumnMap& map = column_map(g);
  const std::uint32_t* idx = map.index.data();
  const std::size_t in = map.in, KP = map.index.size();
  const auto n = static_cast<std::ptrdiff_t>(samples);
  const std::size_t K = g.patch_size(), P = g.out_spatial();
#pragma omp parallel for if (samples * KP > kParallelThreshold)
  for (std::ptrdiff_t s = 0; s < n; ++s)
    gather_columns(idx, in, map.padded, K, P, P, x + static_cast<std::size_t>(s) * in,
                   cols + static_cast<std::size_t>(s) * KP);
}

template <typename T>
bool conv2d_forward_direct(SimdPath path, const WindowGeometry& g, std::size_t out,
                           std::size_t samples, const T* x, const T* w, const T* bias, T* z,
                           T* cols, std::size_t cols_elements) {
  if (path == SimdPath::kBaseline || out > kDirectConvMaxOut || samples == 0) return false;
  const std::size_t K = g.patch_size(), P = g.out_spatial();
  const std::size_t ldc = conv_column_stride<T>(P), per_thread = K * ldc;
  const std::size_t threads = std::min(
      {static_cast<std::size_t>(omp_get_max_threads()), samples, cols_elements / per_thread});
  if (threads == 0) return false;
  const ColumnMap& map = column_map(g);
  const std::uint32_t* idx = map.index.data();
  const std::size_t in = map.in;
  const auto n = static_cast<std::ptrdiff_t>(samples);
#pragma omp parallel num_threads( \
    static_cast <int>(threads)) if (threads > 1 && samples * K * P > kParallelThreshold)
  {
    // This thread's columns: each row's tail past P zeroed once, then every sample's gather.
    T* c = cols + static_cast<std::size_t>(omp_get_thread_num()) * per_thread;
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t p = P; p < ldc; ++p) c[k * ldc + p] = T(0);
#pragma omp for schedule(static)
    for (std::ptrdiff_t s = 0; s < n; ++s) {
      const T* xs = x + static_cast<std::size_t>(s) * in;
      T* zs = z + static_cast<std::size_t>(s) * out * P;
      if (path == SimdPath::kAvx512) {
        avx512::conv_gather_columns(idx, in, map.padded, K, P, ldc, xs, c);
        avx512::conv_columns_product(out, K, P, ldc, c, w, bias, zs);
      } else {
        avx2::conv_gather_columns(idx, in, map.padded, K, P, ldc, xs, c);
        avx2::conv_columns_product(out, K, P, ldc, c, w, bias, zs);
      }
    }
  }
  return true;
}

// Each column entry added to the input element im2col copied it from.  Each sample is one
// thread's, in a fixed order, so the sums are deterministic without the gather formula
// (kernels::col2im_entry, which the CUDA kernel keeps because its threads would otherwise need
// atomics); only their order differs from it.
template <typename T>
void col2im(const WindowGeometry& g, std::size_t samples, const T* cols, T* x) {
  const ColumnMap& map = column_map(g);
  const std::uint32_t* idx = map.index.data();
  const std::size_t in = map.in, KP = map.index.size();
  const auto n = static_cast<std::ptrdiff_t>(samples);
#pragma omp parallel for if (samples * KP > kParallelThreshold)
  for (std::ptrdiff_t s = 0; s < n; ++s) {
    T* xs = x + static_cast<std::size_t>(s) * in;
    const T* cs = cols + static_cast<std::size_t>(s) * KP;
    for (std::size_t i = 0; i < in; ++i) xs[i] = T(0);
    if (map.padded) {
      for (std::size_t e = 0; e < KP; ++e)
        if (idx[e] < in) xs[idx[e]] += cs[e];
    } else {
      for (std::size_t e = 0; e < KP; ++e) xs[idx[e]] += cs[e];
    }
  }
}

template <typename T>
void add_channel_bias(std::size_t samples, std::size_t channels, std::size_t spatial, const T* bias,
                      T* z) {
  const std::size_t pairs = samples * channels;
#pragma omp parallel for if (pairs * spatial > kParallelThreshold)
  for (std::size_t sc = 0; sc < pairs; ++sc) {
    const T b = bias[sc % channels];
    T* zc = z + sc * spatial;
    for (std::size_t p = 0; p < spatial; ++p) zc[p] += b;
  }
}

template <typename T>
void channel_sums(std::size_t rows, std::size_t channels, std::size_t spatial, const T* g_out, T* j,
                  std::size_t ldj) {
#pragma omp parallel for if (rows * channels * spatial > kParallelThreshold)
  for (std::size_t r = 0; r < rows; ++r) {
    const T* gr = g_out + r * channels * spatial;
    T* jr = j + r * ldj;
    for (std::size_t c = 0; c < channels; ++c) {
      T sum = T(0);
      for (std::size_t p = 0; p < spatial; ++p) sum += gr[c * spatial + p];
      jr[c] = sum;
    }
  }
}

template <typename T>
void max_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y, T* argmax) {
  const std::size_t C = g.channels, in = g.in_size(), P = g.out_spatial();
  const std::size_t pairs = samples * C;
#pragma omp parallel for if (pairs * P * g.kernel_h * g.kernel_w > kParallelThreshold)
  for (std::size_t sc = 0; sc < pairs; ++sc) {
    const std::size_t s = sc / C, c = sc - s * C;
    const T* xs = x + s * in;
    for (std::size_t oy = 0; oy < g.out_height; ++oy)
      for (std::size_t ox = 0; ox < g.out_width; ++ox) {
        const std::size_t o = sc * P + oy * g.out_width + ox;
        std::size_t index = 0;
        y[o] = kernels::max_pool_entry(g, xs, c, oy, ox, &index);
        if (argmax != nullptr) argmax[o] = static_cast<T>(index);
      }
  }
}

template <typename T>
void max_pool_backward(const WindowGeometry& g, std::size_t rows, std::size_t group,
                       const T* argmax, const T* g_out, T* g_in) {
  const std::size_t C = g.channels, in = g.in_size(), out = C * g.out_spatial();
  const std::size_t pairs = rows * C;
#pragma omp parallel for if (rows * in > kParallelThreshold)
  for (std::size_t rc = 0; rc < pairs; ++rc) {
    const std::size_t r = rc / C, c = rc - r * C;
    const T* am = argmax + (r / group) * out;
    const T* go = g_out + r * out;
    T* gi = g_in + r * in;
    for (std::size_t y = 0; y < g.height; ++y)
      for (std::size_t xx = 0; xx < g.width; ++xx)
        gi[(c * g.height + y) * g.width + xx] =
            kernels::max_pool_backward_entry(g, am, go, c, y, xx);
  }
}

template <typename T>
void avg_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y) {
  const std::size_t C = g.channels, in = g.in_size(), P = g.out_spatial();
  const std::size_t pairs = samples * C;
#pragma omp parallel for if (pairs * P * g.kernel_h * g.kernel_w > kParallelThreshold)
  for (std::size_t sc = 0; sc < pairs; ++sc) {
    const std::size_t s = sc / C, c = sc - s * C;
    const T* xs = x + s * in;
    for (std::size_t oy = 0; oy < g.out_height; ++oy)
      for (std::size_t ox = 0; ox < g.out_width; ++ox)
        y[sc * P + oy * g.out_width + ox] = kernels::avg_pool_entry(g, xs, c, oy, ox);
  }
}

template <typename T>
void avg_pool_backward(const WindowGeometry& g, std::size_t rows, const T* g_out, T* g_in) {
  const std::size_t C = g.channels, in = g.in_size(), out = C * g.out_spatial();
  const std::size_t pairs = rows * C;
#pragma omp parallel for if (rows * in > kParallelThreshold)
  for (std::size_t rc = 0; rc < pairs; ++rc) {
    const std::size_t r = rc / C, c = rc - r * C;
    const T* go = g_out + r * out;
    T* gi = g_in + r * in;
    for (std::size_t y = 0; y < g.height; ++y)
      for (std::size_t xx = 0; xx < g.width; ++xx)
        gi[(c * g.height + y) * g.width + xx] = kernels::avg_pool_backward_entry(g, go, c, y, xx);
  }
}

#define LMTRAIN_INSTANTIATE(T)                                                                     \
  template void gemm_strided_batched<T>(                                                           \
      Trans, Trans, std::size_t, std::size_t, std::size_t, T, const T*, std::size_t, std::size_t,  \
      const T*, std::size_t, std::size_t, T, T*, std::size_t, std::size_t, std::size_t);           \
  template void im2col<T>(const WindowGeometry&, std::size_t, const T*, T*);                       \
  template bool conv2d_forward_direct<T>(SimdPath, const WindowGeometry&, std::size_t,             \
                                         std::size_t, const T*, const T*, const T*, T*, T*,        \
                                         std::size_t);                                             \
  template void col2im<T>(const WindowGeometry&, std::size_t, const T*, T*);                       \
  template void add_channel_bias<T>(std::size_t, std::size_t, std::size_t, const T*, T*);          \
  template void channel_sums<T>(std::size_t, std::size_t, std::size_t, const T*, T*, std::size_t); \
  template void max_pool_forward<T>(const WindowGeometry&, std::size_t, const T*, T*, T*);         \
  template void max_pool_backward<T>(const WindowGeometry&, std::size_t, std::size_t, const T*,    \
                                     const T*, T*);                                                \
  template void avg_pool_forward<T>(const WindowGeometry&, std::size_t, const T*, T*);             \
  template void avg_pool_backward<T>(const WindowGeometry&, std::size_t, const T*, T*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cpu
