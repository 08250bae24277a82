// The CPU backend's GEMM on every transpose combination, for the shapes it hands to its own loop
// or to GEMV (k = 1, n = 1, m = 1) and for general ones, against a naive triple loop in double;
// with β = 0 the output's old contents (NaN here) must not leak in.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lmtrain/backend/backend.h"
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

}  // namespace
}  // namespace lmtrain
