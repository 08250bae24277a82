// Split-K A = α JᵀJ + β A (backend/split_k_syrk.h) on the CPU backend, through the same
// LinearAlgebra calls the CUDA backend makes (strided-batched GEMM, GEMM, reduce_upper): against
// the backend's own SYRK and a float64 host product, for float and double, on odd n and n that
// are not a multiple of the tile, row counts that are not a multiple of the block, padded row
// strides, whole products and panels, β = 0 (C never read: it holds NaN) and β ≠ 0; the lower
// triangle is left alone, and two runs give the same bits.
#include "lmtrain/backend/split_k_syrk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/rng.h"

namespace lmtrain {
namespace {

template <typename T>
struct Case {
  std::size_t n, k, ldj;
  std::vector<T> j;
};

template <typename T>
Case<T> random_case(std::size_t n, std::size_t k, std::size_t ldj, std::uint64_t seed) {
  Rng rng(seed);
  Case<T> c{n, k, ldj, std::vector<T>(k * ldj)};
  for (std::size_t r = 0; r < k; ++r)
    for (std::size_t q = 0; q < ldj; ++q)  // the padding columns too: they must not be read
      c.j[r * ldj + q] = q < n ? static_cast<T>(rng.normal()) : std::numeric_limits<T>::quiet_NaN();
  return c;
}

// Upper triangle of α JᵀJ + β C0 in double, and the scale Σ|J_ri||J_rj| that bounds its rounding.
template <typename T>
void reference(const Case<T>& c, double alpha, double beta, const std::vector<T>& c0,
               std::vector<double>& want, std::vector<double>& magnitude) {
  const std::size_t n = c.n;
  want.assign(n * n, 0.0);
  magnitude.assign(n * n, 0.0);
  for (std::size_t r = 0; r < c.k; ++r)
    for (std::size_t p = 0; p < n; ++p) {
      const double jp = c.j[r * c.ldj + p];
      for (std::size_t q = p; q < n; ++q) {
        const double jq = c.j[r * c.ldj + q];
        want[p * n + q] += jp * jq;
        magnitude[p * n + q] += std::fabs(jp * jq);
      }
    }
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = p; q < n; ++q) {
      want[p * n + q] *= alpha;
      magnitude[p * n + q] *= std::fabs(alpha);
      if (beta != 0) {
        want[p * n + q] += beta * static_cast<double>(c0[p * n + q]);
        magnitude[p * n + q] += std::fabs(beta * static_cast<double>(c0[p * n + q]));
      }
    }
}

// C0: the strict lower triangle holds a sentinel the product must leave; with β = 0 the upper
// one holds NaN (a read would show), otherwise random values.
template <typename T>
std::vector<T> initial_c(std::size_t n, double beta, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<T> c(n * n);
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = 0; q < n; ++q)
      c[p * n + q] = q < p       ? T(-7.25)
                     : beta == 0 ? std::numeric_limits<T>::quiet_NaN()
                                 : static_cast<T>(rng.normal());
  return c;
}

// Every upper entry within a few ulps of T per summed term of its magnitude, the lower triangle
// untouched.
template <typename T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want,
                  const std::vector<double>& magnitude, std::size_t n, std::size_t k,
                  const char* what) {
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = 0; q < n; ++q) {
      if (q < p) {
        ASSERT_EQ(got[p * n + q], T(-7.25)) << what << ": lower (" << p << ", " << q << ")";
        continue;
      }
      ASSERT_NEAR(got[p * n + q], want[p * n + q],
                  4 * eps * (static_cast<double>(k) + 2) * magnitude[p * n + q] + 1e-300)
          << what << " n=" << n << " k=" << k << " at (" << p << ", " << q << ")";
    }
}

template <typename T>
void check(const Case<T>& c, const std::vector<SplitKPlan>& plans, double alpha, double beta,
           std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << c.n << " k=" << c.k << " ldj=" << c.ldj << " β=" << beta);
  auto backend = make_cpu_backend<T>();
  const std::vector<T> c0 = initial_c<T>(c.n, beta, seed);
  std::vector<double> want, magnitude;
  reference(c, alpha, beta, c0, want, magnitude);

  std::vector<T> syrk = c0;
  backend->syrk_ata(c.n, c.k, static_cast<T>(alpha), c.j.data(), c.ldj, static_cast<T>(beta),
                    syrk.data());
  expect_close(syrk, want, magnitude, c.n, c.k, "SYRK");

  for (const SplitKPlan& plan : plans) {
    SCOPED_TRACE(plan.describe());
    std::vector<T> workspace(plan.workspace_elements(), std::numeric_limits<T>::quiet_NaN());
    std::vector<T> split = c0;
    split_k_syrk_ata(*backend, plan, static_cast<T>(alpha), c.j.data(), c.ldj, static_cast<T>(beta),
                     split.data(), workspace.data());
    expect_close(split, want, magnitude, c.n, c.k, "split-K");

    // A second run on a poisoned workspace: the same bits.
    std::fill(workspace.begin(), workspace.end(), std::numeric_limits<T>::quiet_NaN());
    std::vector<T> again = c0;
    split_k_syrk_ata(*backend, plan, static_cast<T>(alpha), c.j.data(), c.ldj, static_cast<T>(beta),
                     again.data(), workspace.data());
    for (std::size_t p = 0; p < c.n; ++p)
      ASSERT_EQ(std::memcmp(split.data() + p * c.n + p, again.data() + p * c.n + p,
                            (c.n - p) * sizeof(T)),
                0)
          << "row " << p << " differs between two runs";
  }
}

// A plan with the blocks and panels given, for shapes the sizing rules would not cut so finely.
SplitKPlan plan_of(std::size_t n, std::size_t k, std::size_t block_rows, std::size_t panels,
                   std::size_t ldp) {
  SplitKPlan plan;
  plan.n = n;
  plan.k = k;
  plan.block_rows = block_rows;
  plan.blocks = (k + block_rows - 1) / block_rows;
  plan.panels = panels;
  plan.ldp = ldp;
  return plan;
}

template <typename T>
class SplitKSyrk : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SplitKSyrk, Precisions);

TYPED_TEST(SplitKSyrk, EqualsSyrkAndTheFloat64ProductOnOddShapesAndPaddedStrides) {
  using T = TypeParam;
  struct Shape {
    std::size_t n, k, ldj, block_rows, panels, ldp;
  };
  // Odd n, n not a multiple of the block or the tile, k not a multiple of the block (a short last
  // block, a block of one row), padded strides of J and of the partials, 1–8 panels (the last
  // shorter than the others, or of one row), one block of every row (GEMM panels).
  for (const Shape& s : {Shape{1, 5, 1, 2, 1, 1}, Shape{7, 13, 7, 5, 1, 8},
                         Shape{7, 13, 11, 13, 1, 7}, Shape{23, 100, 24, 33, 2, 24},
                         Shape{61, 257, 64, 64, 3, 61}, Shape{62, 301, 62, 300, 4, 64},
                         Shape{129, 1000, 132, 250, 2, 132}, Shape{130, 777, 130, 128, 4, 131},
                         Shape{130, 777, 132, 777, 8, 131}, Shape{61, 257, 61, 257, 3, 64}}) {
    const Case<T> c = random_case<T>(s.n, s.k, s.ldj, s.n * 1009 + s.k);
    const SplitKPlan plan = plan_of(s.n, s.k, s.block_rows, s.panels, s.ldp);
    for (const double beta : {0.0, 0.5}) check(c, {plan}, 1.25, beta, s.k + s.n);
  }
}

TYPED_TEST(SplitKSyrk, EveryCandidatePlanOfW2SizedShapes) {
  using T = TypeParam;
  // W2's n = 769 (a 1-256-1 network) and two n that are not: a 132-multiprocessor device, J's
  // rows padded to a multiple of 4 as the CUDA backend pads them.
  struct Shape {
    std::size_t n, k;
    double beta;
  };
  for (const Shape& s : {Shape{769, 2000, 0.0}, Shape{300, 3001, 1.0}, Shape{517, 1601, 0.5}}) {
    const std::size_t ldj = (s.n + 3) / 4 * 4;
    const std::vector<SplitKPlan> plans = split_k_candidates(s.n, s.k, 132, 4);
    ASSERT_FALSE(plans.empty()) << s.n << " × " << s.k;
    check(random_case<T>(s.n, s.k, ldj, s.n + s.k), plans, 1.0, s.beta, s.n);
  }
}

TEST(SplitKPlan, CutsKIntoBlocksThatFillTheDeviceAndCoverEveryRow) {
  // W2 on an H200: 769 columns are 7 × 7 tiles of 128, so 264 tiles (two waves of 132
  // multiprocessors) want 6 blocks of 10 000 rows.
  const SplitKPlan w2 = plan_split_k(769, 10000, 1, 132, 4);
  EXPECT_EQ(w2.blocks, 6u);
  EXPECT_EQ(w2.block_rows, 1667u);
  EXPECT_EQ(w2.ldp, 772u);
  EXPECT_EQ(w2.workspace_elements(), 6u * 769u * 772u);
  for (const std::size_t n : {1u, 61u, 769u, 1500u, 5000u})
    for (const std::size_t k : {1u, 255u, 256u, 1000u, 10000u, 100001u})
      for (const std::size_t panels : {1u, 2u, 4u}) {
        const SplitKPlan p = plan_split_k(n, k, panels, 132, 8);
        SCOPED_TRACE(::testing::Message() << n << " × " << k << ", " << p.describe());
        EXPECT_GE(p.blocks * p.block_rows, k);
        EXPECT_LT((p.blocks - 1) * p.block_rows, k);
        EXPECT_TRUE(p.blocks == 1 || p.block_rows >= kSplitKMinBlockRows);
        EXPECT_TRUE(p.blocks == 1 || p.blocks * n <= k);  // partials no larger than J
        EXPECT_EQ(p.ldp % 8, 0u);
        EXPECT_GE(p.ldp, n);
      }
  // Panels are offered where each is two tiles high, and only plans that split K.
  EXPECT_EQ(split_k_candidates(769, 10000, 132, 4).size(), 2u);   // 1 and 2 panels
  EXPECT_EQ(split_k_candidates(1100, 10000, 132, 4).size(), 3u);  // 1, 2 and 4
  EXPECT_TRUE(split_k_candidates(769, 300, 132, 4).empty());      // too few rows to split
  // n = 2 100 is 17 × 17 tiles, more than two waves: A alone fills the device, SYRK is left
  // alone, and no plan's partials grow with n².
  EXPECT_TRUE(split_k_candidates(2100, 100000, 132, 4).empty());
  EXPECT_EQ(split_k_candidates(2040, 100000, 132, 4).size(), 3u);
  // There GEMM panels are offered instead (K whole, one n × n partial): 4 and 8 panels for W5's
  // n = 11 101, 4 alone where 8 would be under two tiles high, none where A does not fill the
  // device or K is empty.
  const std::vector<SplitKPlan> w5 = panel_candidates(11101, 100000, 132, 4);
  ASSERT_EQ(w5.size(), 2u);
  for (const SplitKPlan& p : w5) {
    EXPECT_EQ(p.blocks, 1u);
    EXPECT_EQ(p.block_rows, 100000u);
    EXPECT_EQ(p.ldp, 11104u);
    EXPECT_EQ(p.workspace_elements(), 11101u * 11104u);
  }
  EXPECT_EQ(w5[0].panels, 4u);
  EXPECT_EQ(w5[1].panels, 8u);
  EXPECT_EQ(w5[1].describe(), "1 block of 100000 rows, 8 panels");
  EXPECT_EQ(panel_candidates(2100, 100000, 132, 4).size(), 2u);
  EXPECT_EQ(panel_candidates(1500, 100000, 16, 4).size(), 1u);
  EXPECT_TRUE(panel_candidates(2040, 100000, 132, 4).empty());
  EXPECT_TRUE(panel_candidates(11101, 0, 132, 4).empty());
}

TYPED_TEST(SplitKSyrk, GemmPanelsOfAWideA) {
  using T = TypeParam;
  // panel_candidates' plan (one block, 4 panels: 8 would be under two tiles high) on a device
  // of 4 multiprocessors, J's rows padded as the CUDA backend pads them, β 0 and 1.  (8 panels
  // and others of one block: the odd shapes above.)
  const std::size_t n = 1100, k = 301, ldj = 1104;
  const std::vector<SplitKPlan> plans = panel_candidates(n, k, 4, 4);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].describe(), "1 block of 301 rows, 4 panels");
  for (const double beta : {0.0, 1.0}) check(random_case<T>(n, k, ldj, 17), plans, 1.0, beta, 19);
}

}  // namespace
}  // namespace lmtrain
