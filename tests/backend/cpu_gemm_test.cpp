// The CPU backend's GEMM on every transpose combination, for the shapes it hands to its own loop
// or to GEMV (k = 1, n = 1, m = 1) and for general ones, against a naive triple loop in double;
// with β = 0 the output's old contents (NaN here) must not leak in.  Likewise its dense layer's
// forward product, which has its own loops for few inputs.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/cpu_threads.h"
#include "lmtrain/core/rng.h"

namespace lmtrain {
namespace {

template <typename T>
void check_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, double beta) {
  Rng rng(m * 131 + n * 17 + k);
  // Leading dimensions larger than the rows, so strides are exercised.
  const std::size_t a_rows = ta == Trans::kNo ? m : k, a_cols = ta == Trans::kNo ? k : m;
  const std::size_t b_rows = tb == Trans::kNo ? k : n, b_cols = tb == Trans::kNo ? n : k;
  const std::size_t lda = a_cols + 2, ldb = b_cols + 3, ldc = n + 1;
  std::vector<T> a(a_rows * lda), b(b_rows * ldb), c(m * ldc);
  for (auto& v : a) v = static_cast<T>(rng.normal());
  for (auto& v : b) v = static_cast<T>(rng.normal());
  for (auto& v : c)
    v = beta == 0 ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(rng.normal());
  auto op_a = [&](std::size_t i, std::size_t p) {
    return static_cast<double>(ta == Trans::kNo ? a[i * lda + p] : a[p * lda + i]);
  };
  auto op_b = [&](std::size_t p, std::size_t j) {
    return static_cast<double>(tb == Trans::kNo ? b[p * ldb + j] : b[j * ldb + p]);
  };
  const double alpha = 0.75;
  std::vector<double> expected(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) s += op_a(i, p) * op_b(p, j);
      expected[i * n + j] =
          alpha * s + (beta == 0 ? 0.0 : beta * static_cast<double>(c[i * ldc + j]));
    }
  auto backend = make_cpu_backend<T>();
  // The CPU backend's device memory is host memory: plain vectors stand in for its buffers.
  backend->gemm(ta, tb, m, n, k, static_cast<T>(alpha), a.data(), lda, b.data(), ldb,
                static_cast<T>(beta), c.data(), ldc);
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      ASSERT_NEAR(c[i * ldc + j], expected[i * n + j], 8 * eps * (static_cast<double>(k) + 2))
          << m << "×" << n << "×" << k << " at (" << i << ", " << j << ")";
}

TEST(CpuGemm, DegenerateAndGeneralShapesOnEveryTransposeMatchANaiveProduct) {
  const std::size_t shapes[][3] = {{37, 20, 1}, {37, 1, 20},   {1, 23, 19},  {1, 1, 9},
                                   {13, 11, 7}, {1000, 20, 1}, {1000, 1, 20}};
  for (const Trans ta : {Trans::kNo, Trans::kYes})
    for (const Trans tb : {Trans::kNo, Trans::kYes})
      for (const auto& s : shapes)
        for (const double beta : {0.0, 0.5}) {
          check_gemm<float>(ta, tb, s[0], s[1], s[2], beta);
          check_gemm<double>(ta, tb, s[0], s[1], s[2], beta);
        }
}

// z = x·Wᵀ + b: the one-pass loops for 1–4 inputs (several outputs) and the GEMM path beyond,
// against the sum in double; z's old contents (NaN) must not leak in.
template <typename T>
void check_dense_forward(std::size_t batch, std::size_t out, std::size_t in) {
  Rng rng(batch * 7 + out * 3 + in);
  std::vector<T> x(batch * in), w(out * in), b(out);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = static_cast<T>(rng.normal());
  std::vector<T> z(batch * out, std::numeric_limits<T>::quiet_NaN());
  make_cpu_backend<T>()->dense_forward(batch, out, in, x.data(), w.data(), b.data(), z.data());
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t r = 0; r < batch; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b[o];
      for (std::size_t i = 0; i < in; ++i)
        s += static_cast<double>(x[r * in + i]) * static_cast<double>(w[o * in + i]);
      ASSERT_NEAR(z[r * out + o], s, 8 * eps * (static_cast<double>(in) + 2))
          << batch << "×" << in << " → " << out << " at (" << r << ", " << o << ")";
    }
}

TEST(CpuDenseForward, EveryInputCountMatchesTheSumInDouble) {
  for (const std::size_t in : {1, 2, 3, 4, 5, 20})
    for (const std::size_t out : {1, 3, 20, 37}) {
      check_dense_forward<float>(1000, out, in);
      check_dense_forward<double>(57, out, in);
    }
}

TEST(CpuBackendMatrix, CopyUpperCopiesTheUpperTriangleAndLeavesTheLowerAlone) {
  // The Cholesky solver's copy of A on every λ retry: potrf reads only the upper triangle
  // (row-major), so only it is copied.  Sizes below and above the OpenMP threshold.
  auto backend = make_cpu_backend<float>();
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{61}, std::size_t{769}}) {
    Rng rng(n);
    std::vector<float> src(n * n), dst(n * n);
    for (auto& v : src) v = static_cast<float>(rng.normal());
    for (auto& v : dst) v = static_cast<float>(rng.normal());
    const std::vector<float> before = dst;
    backend->copy_upper(n, src.data(), dst.data());
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        ASSERT_EQ(dst[i * n + j], j >= i ? src[i * n + j] : before[i * n + j])
            << "n = " << n << " at (" << i << ", " << j << ")";
  }
}

// The Cholesky calls on a random SPD matrix against the solution checked in double, and with a NaN
// in A or b: no exception (the step counts a failed factorization or a non-finite δ as an invalid
// attempt and raises λ), either a failed factorization or a non-finite solution.
TEST(CpuBackendMatrix, CholeskySolvesAndANanFailsTheAttemptWithoutThrowing) {
  auto backend = make_cpu_backend<float>();
  const std::size_t n = 61;
  Rng rng(3);
  std::vector<double> m(n * n);
  for (auto& v : m) v = rng.normal();
  std::vector<float> a(n * n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double s = i == j ? static_cast<double>(n) : 0.0;
      for (std::size_t k = 0; k < n; ++k) s += m[i * n + k] * m[j * n + k] / static_cast<double>(n);
      a[i * n + j] = static_cast<float>(s);
    }
    b[i] = static_cast<float>(rng.normal());
  }
  std::vector<float> factor = a, x = b;
  ASSERT_EQ(backend->potrf(n, factor.data()), 0);
  backend->potrs(n, factor.data(), x.data());
  for (std::size_t i = 0; i < n; ++i) {  // A·x = b, residual in double
    double r = -static_cast<double>(b[i]);
    for (std::size_t j = 0; j < n; ++j) r += static_cast<double>(a[i * n + j]) * x[j];
    ASSERT_NEAR(r, 0.0, 1e-4) << i;
  }
  auto all_finite = [](const std::vector<float>& v) {
    for (const float e : v)
      if (!std::isfinite(e)) return false;
    return true;
  };
  factor = a;
  factor[5 * n + 5] = std::numeric_limits<float>::quiet_NaN();
  x = b;
  int info = 0;
  ASSERT_NO_THROW(info = backend->potrf(n, factor.data()));
  if (info == 0) {
    ASSERT_NO_THROW(backend->potrs(n, factor.data(), x.data()));
    EXPECT_FALSE(all_finite(x));
  }
  factor = a;
  x = b;
  x[7] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(backend->potrf(n, factor.data()), 0);
  ASSERT_NO_THROW(backend->potrs(n, factor.data(), x.data()));
  EXPECT_FALSE(all_finite(x));
}

// The CPU's slicing preference (cpu_backend.cpp, kCacheSliceBytes): 2 MiB of working set per
// BLAS thread and 512 Jacobian rows at least; on two threads, enough rows that a slice's SYRK
// (n²·rows/2 multiply-adds) is twice the 2²⁸ from which OpenBLAS runs it threaded.  W2 (769
// parameters) then slices in 1 816 rows, and a 61-parameter model's batch is never split.
TEST(CpuBackendSlicing, CacheSizedWorkingSetAndThreadedSyrk) {
  // Slices are sized for the most threads the backend runs on (set_cpu_threads here), not for
  // the count a phase happens to run on, so that they do not change during a run.
  set_cpu_threads(1);
  const SlicePreference one = make_cpu_backend<float>()->slice_preference(769);
  set_cpu_threads(2);
  auto backend = make_cpu_backend<float>();
  const SlicePreference two = backend->slice_preference(769);
  const SlicePreference small = backend->slice_preference(61);
  const bool two_threads = backend->name().find("up to 2 threads") != std::string::npos;
  set_cpu_threads(0);
  EXPECT_EQ(one.bytes, std::size_t{2} << 20);
  EXPECT_EQ(one.min_rows, 512u);
  if (!two_threads) GTEST_SKIP() << "this process may run on one processor only";
  EXPECT_EQ(two.bytes, std::size_t{4} << 20);
  EXPECT_EQ(two.min_rows, 1816u);  // ⌊4·2²⁸ / 769²⌋ + 1
  EXPECT_GE(769.0 * 769.0 * static_cast<double>(two.min_rows) / 2, 2.0 * (1 << 28));
  EXPECT_GT(small.min_rows, 100'000u);
}

}  // namespace
}  // namespace lmtrain
