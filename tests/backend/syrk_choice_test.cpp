// The measured choice between SYRK and split-K (backend/syrk_choice.h), run on the CPU backend as
// the CUDA backend runs it: the CPU's own SYRK stands in for cuBLAS's, wrapped to count its calls
// and, where a test needs the measurement to go one way, made slower.  Every result is checked
// against the CPU's SYRK; a shape is measured once, and its later calls give the same bits.
#include "lmtrain/backend/syrk_choice.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/rng.h"

namespace lmtrain {
namespace {

template <typename T>
std::vector<T> random_rows(std::size_t k, std::size_t ldj, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<T> j(k * ldj);
  for (T& v : j) v = static_cast<T>(rng.normal());
  return j;
}

// max over the upper triangle of |got − want| / max |want|.
template <typename T>
double upper_error(const std::vector<T>& got, const std::vector<T>& want, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = p; q < n; ++q) {
      diff = std::max(diff, std::fabs(static_cast<double>(got[p * n + q]) - want[p * n + q]));
      scale = std::max(scale, std::fabs(static_cast<double>(want[p * n + q])));
    }
  return diff / scale;
}

template <typename T>
struct Fixture {
  std::unique_ptr<Backend<T>> backend;
  int syrk_calls = 0;
  std::chrono::milliseconds syrk_delay{0};

  explicit Fixture(std::size_t memory_limit = 0) : backend(make_cpu_backend<T>(memory_limit)) {}
  // A SyrkChoice over the CPU backend for a device of `multiprocessors`, its "device SYRK" the
  // CPU's, counted and delayed as the test sets.
  SyrkChoice<T> choice(std::size_t multiprocessors) {
    return SyrkChoice<T>(
        *backend, multiprocessors, 4,
        [this](std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta, T* c) {
          ++syrk_calls;
          std::this_thread::sleep_for(syrk_delay);
          backend->syrk_ata(n, k, alpha, j, ldj, beta, c);
        });
  }
};

template <typename T>
class SyrkChoiceTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SyrkChoiceTest, Precisions);

TYPED_TEST(SyrkChoiceTest, ASlowerSyrkLosesToSplitKWhichThenRunsEveryCallOfTheShape) {
  using T = TypeParam;
  Fixture<T> f;
  f.syrk_delay = std::chrono::milliseconds(30);  // far beyond split-K's time for this shape
  SyrkChoice<T> choice = f.choice(132);
  const std::size_t n = 301, k = 2003, ldj = 304;  // odd n and k, a padded stride
  const std::vector<T> j = random_rows<T>(k, ldj, 3);
  std::vector<T> want(n * n, T(0)), first(n * n, std::numeric_limits<T>::quiet_NaN());
  f.backend->syrk_ata(n, k, T(1), j.data(), ldj, T(0), want.data());

  choice.syrk_ata(n, k, T(1), j.data(), ldj, T(0), first.data());
  const std::string report = choice.report();
  EXPECT_NE(report.find("n = 301, 2003 rows (row stride 304): split-K, "), std::string::npos)
      << report;
  EXPECT_NE(report.find("against SYRK"), std::string::npos) << report;
  EXPECT_EQ(f.syrk_calls, 1 + SyrkChoice<T>::kRepeats);  // warm-up and timed runs only
  const double eps = std::numeric_limits<T>::epsilon();
  EXPECT_LE(upper_error(first, want, n), 50 * eps);

  // The shape is decided: no more SYRK, no more measurement, the same bits (β = 0 and β = 1).
  std::vector<T> second(n * n, std::numeric_limits<T>::quiet_NaN());
  choice.syrk_ata(n, k, T(1), j.data(), ldj, T(0), second.data());
  for (std::size_t p = 0; p < n; ++p)
    ASSERT_EQ(std::memcmp(first.data() + p * n + p, second.data() + p * n + p, (n - p) * sizeof(T)),
              0);
  choice.syrk_ata(n, k, T(1), j.data(), ldj, T(1), second.data());  // A += JᵀJ: twice A
  std::vector<T> twice = want;
  f.backend->syrk_ata(n, k, T(1), j.data(), ldj, T(1), twice.data());
  EXPECT_LE(upper_error(second, twice, n), 50 * eps);
  EXPECT_EQ(f.syrk_calls, 1 + SyrkChoice<T>::kRepeats);
  EXPECT_EQ(choice.report(), report);

  // TF32 switched, say: the next call measures again.
  choice.forget();
  EXPECT_EQ(choice.report(), "");
  choice.syrk_ata(n, k, T(1), j.data(), ldj, T(0), second.data());
  EXPECT_EQ(f.syrk_calls, 2 * (1 + SyrkChoice<T>::kRepeats));
}

TYPED_TEST(SyrkChoiceTest, ShapesWithoutACandidateKeepSyrkUnmeasuredAndSaySo) {
  using T = TypeParam;
  Fixture<T> f;
  SyrkChoice<T> choice = f.choice(132);
  struct Shape {
    std::size_t n, k;
    const char* why;
  };
  // 300 rows of 301 columns cannot be split into blocks of ≥ 301 rows; 2 100 columns are 17 × 17
  // tiles, more than two waves of 132 multiprocessors (a float A: SYRK; a float64 A is timed
  // against GEMM panels, below).
  std::vector<Shape> shapes = {Shape{301, 300, "rows are too few to split"}};
  if (std::is_same_v<T, float>)
    shapes.push_back({2100, 40, "fill 2 waves of the 132 multiprocessors"});
  for (const Shape& s : shapes) {
    const std::vector<T> j = random_rows<T>(s.k, s.n, s.n);
    std::vector<T> got(s.n * s.n, T(0)), want(s.n * s.n, T(0));
    f.syrk_calls = 0;
    choice.syrk_ata(s.n, s.k, T(0.5), j.data(), s.n, T(0), got.data());
    EXPECT_EQ(f.syrk_calls, 1) << s.why;  // the call itself, nothing timed
    f.backend->syrk_ata(s.n, s.k, T(0.5), j.data(), s.n, T(0), want.data());
    EXPECT_EQ(got, want) << s.why;
    EXPECT_NE(choice.report().find(s.why), std::string::npos) << choice.report();
  }
}

TYPED_TEST(SyrkChoiceTest, AFloat64AThatFillsTheDeviceIsTimedAgainstGemmPanels) {
  using T = TypeParam;
  // 1 100 columns are 9 × 9 tiles, more than two waves of 4 multiprocessors: A fills that device
  // alone and K is not split.  A float64 A: SYRK (made slow) against 4 GEMM panels (8 would be
  // under two tiles high), which win and give SYRK's A; a float A: SYRK, unmeasured.
  Fixture<T> f;
  f.syrk_delay = std::chrono::milliseconds(200);
  SyrkChoice<T> choice = f.choice(4);
  const std::size_t n = 1100, k = 301;
  const std::vector<T> j = random_rows<T>(k, n, 13);
  std::vector<T> want(n * n, T(0)), got(n * n, std::numeric_limits<T>::quiet_NaN());
  f.backend->syrk_ata(n, k, T(1), j.data(), n, T(0), want.data());
  choice.syrk_ata(n, k, T(1), j.data(), n, T(0), got.data());
  const std::string report = choice.report();
  if (std::is_same_v<T, float>) {
    EXPECT_EQ(f.syrk_calls, 1);
    EXPECT_NE(report.find("fill 2 waves of the 4 multiprocessors"), std::string::npos) << report;
    return;
  }
  EXPECT_EQ(f.syrk_calls, 1 + SyrkChoice<T>::kRepeats);
  EXPECT_NE(report.find("n = 1100, 301 rows: GEMM panels, 1 block of 301 rows, "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("against SYRK"), std::string::npos) << report;
  EXPECT_LE(upper_error(got, want, n), 50 * std::numeric_limits<T>::epsilon());
}

TYPED_TEST(SyrkChoiceTest, SplitKThatWouldTakeOverAQuarterOfTheFreeMemoryIsNotTried) {
  using T = TypeParam;
  // A device of 4 MiB: W2's shape would need 6 partials of 769 × 772 and a scratch A.
  Fixture<T> f(std::size_t{4} << 20);
  SyrkChoice<T> choice = f.choice(132);
  const std::size_t n = 769, k = 5000;
  const std::vector<T> j = random_rows<T>(k, n, 7);
  std::vector<T> got(n * n, T(0));
  choice.syrk_ata(n, k, T(1), j.data(), n, T(0), got.data());
  EXPECT_EQ(f.syrk_calls, 1);
  EXPECT_NE(choice.report().find("exceed a quarter of the device's free memory"), std::string::npos)
      << choice.report();
}

// solver.normal_matrix: syrk and split_k take their way without measuring — split_k even for a
// shape the measurement would not split (2 100 columns fill the device) — and say so; a change of
// method forgets the decisions.  split_k's A against the CPU's SYRK.
TYPED_TEST(SyrkChoiceTest, AMethodAskedForIsTakenWithoutMeasuring) {
  using T = TypeParam;
  Fixture<T> f;
  f.syrk_delay = std::chrono::milliseconds(30);  // auto would choose split-K
  SyrkChoice<T> choice = f.choice(132);
  const std::size_t n = 301, k = 2003;
  const std::vector<T> j = random_rows<T>(k, n, 11);
  std::vector<T> want(n * n, T(0)), got(n * n, T(0));
  f.backend->syrk_ata(n, k, T(1), j.data(), n, T(0), want.data());

  choice.set_method(NormalMatrixMethod::kSyrk);
  choice.syrk_ata(n, k, T(1), j.data(), n, T(0), got.data());
  EXPECT_EQ(f.syrk_calls, 1);  // the call itself, nothing timed
  EXPECT_EQ(got, want);
  EXPECT_NE(choice.report().find("SYRK: SolverOptions::normal_matrix = \"syrk\""),
            std::string::npos)
      << choice.report();

  f.syrk_delay = std::chrono::milliseconds(0);  // auto would keep SYRK now
  choice.set_method(NormalMatrixMethod::kSplitK);
  EXPECT_EQ(choice.report(), "");
  choice.syrk_ata(n, k, T(1), j.data(), n, T(0), got.data());
  EXPECT_EQ(f.syrk_calls, 1);
  EXPECT_NE(choice.report().find("split-K, "), std::string::npos) << choice.report();
  EXPECT_LE(upper_error(got, want, n), 50 * std::numeric_limits<T>::epsilon());

  // 2 100 columns: auto keeps SYRK unmeasured (A fills the device); split_k splits all the same.
  const std::size_t wide = 2100, rows = 4500;
  const std::vector<T> jw = random_rows<T>(rows, wide, 12);
  std::vector<T> want_w(wide * wide, T(0)), got_w(wide * wide, T(0));
  f.backend->syrk_ata(wide, rows, T(1), jw.data(), wide, T(0), want_w.data());
  choice.syrk_ata(wide, rows, T(1), jw.data(), wide, T(0), got_w.data());
  EXPECT_EQ(f.syrk_calls, 1);
  EXPECT_NE(choice.report().find("n = 2100, 4500 rows: split-K, 2 blocks"), std::string::npos)
      << choice.report();
  EXPECT_LE(upper_error(got_w, want_w, wide), 50 * std::numeric_limits<T>::epsilon());
}

}  // namespace
}  // namespace lmtrain
