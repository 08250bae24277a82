// Every operation of the CUDA backend against the CPU backend in double precision, for float and
// double, on random inputs away from zero.  A float result is compared with the fp64 CPU result
// on the same (float-rounded) inputs; errors are normwise: max|got − want| / max|want|.
// The symmetric eigendecomposition is checked by its own residual and orthonormality, which do
// not depend on how eigenvectors are signed or how close eigenvalues are.
#include "lmtrain/backend/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/cuda_fixture.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/core/error.h"
#include "support/reference.h"

namespace lmtrain {
namespace {

template <typename T>
constexpr double kTolerance = testing::kCudaTolerance<T>;

// More elements than a grid of launch.h's kMaxBlocks × kThreads (2²⁰ threads) has threads, so
// every grid-stride loop over them wraps at least once.
constexpr std::size_t kLarge = (std::size_t{3} << 19) + 3;  // 1 572 867
// A normal matrix this large has n² = 4 M elements and 63 × 63 tiles.
constexpr std::size_t kLargeN = 2000;

// Normwise, as the rest of the tests: max|got − want| / max|want| (support/reference.h).
double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  return testing::relative_error(got, want);
}

double relative_error(double got, double want) {
  return std::fabs(got - want) / std::max(std::fabs(want), std::numeric_limits<double>::min());
}

// The upper triangle (row-major) of an n × n matrix, the only part SYRK and potrf define.
std::vector<double> upper(const std::vector<double>& a, std::size_t n) {
  std::vector<double> u;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i; j < n; ++j) u.push_back(a[i * n + j]);
  return u;
}

template <typename T>
class CudaBackendTest : public testing::CudaVsCpuTest<T> {};

TYPED_TEST_SUITE(CudaBackendTest, testing::Precisions, testing::PrecisionName);

TYPED_TEST(CudaBackendTest, DescribesItsDevice) {
  auto& gpu = *this->gpu_;
  EXPECT_EQ(gpu.device_kind(), DeviceKind::kCuda);
  EXPECT_NE(gpu.name().find("cuda:0"), std::string::npos) << gpu.name();
  EXPECT_GT(gpu.available_memory_bytes(), std::size_t{0});
  EXPECT_TRUE(cuda_backend_built());
  EXPECT_FALSE(cuda_device_description(0).empty());
  const int count = cuda_device_count();
  EXPECT_THROW((void)cuda_device_description(count), BackendError);
  EXPECT_THROW((void)make_cuda_backend<TypeParam>(count), BackendError);
  EXPECT_THROW((void)make_cuda_backend<TypeParam>(-1), BackendError);
}

TYPED_TEST(CudaBackendTest, FailedAllocationIsAMemoryPlanErrorAndRecoverable) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  EXPECT_THROW((void)gpu.allocate((std::size_t{1} << 60) / sizeof(T)), MemoryPlanError);
  // The failure must not poison later work.
  const std::vector<T> x = this->random(1000);
  DeviceBuffer<T> d = this->upload(x);
  EXPECT_EQ(this->download(d), this->widen(x));
}

TYPED_TEST(CudaBackendTest, TransfersCopiesAndFill) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  const std::size_t n = kLarge;
  std::vector<T> x = this->random(n);
  DeviceBuffer<T> a = this->upload(x);
  DeviceBuffer<T> b = gpu.allocate(n);
  gpu.copy(a.data(), b.data(), n);
  EXPECT_EQ(this->download(b), this->widen(x));

  // Overlapping ranges behave like memmove, as on the CPU.
  gpu.copy(a.data(), a.data() + 7, n - 7);
  std::memmove(x.data() + 7, x.data(), (n - 7) * sizeof(T));
  EXPECT_EQ(this->download(a), this->widen(x));
  gpu.copy(a.data() + 5, a.data(), n - 5);
  std::memmove(x.data(), x.data() + 5, (n - 5) * sizeof(T));
  EXPECT_EQ(this->download(a), this->widen(x));

  gpu.fill(b.data(), n, T(-2.5));
  EXPECT_EQ(this->download(b), std::vector<double>(n, -2.5));
}

TYPED_TEST(CudaBackendTest, CopyFromHostLetsTheCallerReuseTheSourceAtOnce) {
  // backend.h: the host buffer may be overwritten as soon as copy_from_host returns.  One host
  // buffer is refilled between uploads into 40 device buffers (small: through the pinned staging
  // buffer, each waiting for the previous copy out of it), and one 12 MB upload (synchronous).
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  for (const std::size_t n : {std::size_t{1000}, std::size_t{3} << 20}) {
    SCOPED_TRACE(n);
    const std::size_t uploads = n > 100000 ? 2 : 40;
    std::vector<std::vector<T>> sent;
    std::vector<DeviceBuffer<T>> device;
    std::vector<T> host(n);
    for (std::size_t u = 0; u < uploads; ++u) {
      sent.push_back(this->random(n));
      host = sent.back();
      device.push_back(gpu.allocate(n));
      gpu.copy_from_host(host.data(), device.back().data(), n);
      std::fill(host.begin(), host.end(), T(-7));  // before the device is waited for
    }
    for (std::size_t u = 0; u < uploads; ++u)
      EXPECT_EQ(this->download(device[u]), this->widen(sent[u])) << "upload " << u;
  }
}

TYPED_TEST(CudaBackendTest, GatherRows) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  struct Shape {
    std::size_t rows, cols, count;
  };
  // A batch; and 100 000 rows of 17 (1.7 M elements, 800 kB of indices through the staging).
  for (const Shape& shape : {Shape{50, 7, 23}, Shape{120000, 17, 100000}}) {
    const std::size_t rows = shape.rows, cols = shape.cols, count = shape.count;
    SCOPED_TRACE(count);
    const std::vector<T> src = this->random(rows * cols);
    std::uniform_int_distribution<std::int64_t> pick(0, static_cast<std::int64_t>(rows) - 1);
    std::vector<std::int64_t> index(count);
    for (auto& i : index) i = pick(this->rng_);
    index[3] = index[11];  // a repeat
    DeviceBuffer<T> d_src = this->upload(src);
    DeviceBuffer<T> d_dst = gpu.allocate(count * cols);
    gpu.gather_rows(d_src.data(), cols, index, d_dst.data());
    std::vector<double> want(count * cols);
    const std::vector<double> src64 = this->widen(src);
    cpu.gather_rows(src64.data(), cols, index, want.data());
    EXPECT_EQ(this->download(d_dst), want);
  }
}

TYPED_TEST(CudaBackendTest, ElementwiseLevel1) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  const std::size_t n = kLarge;
  const std::vector<T> x = this->random(n), y = this->random(n);
  const std::vector<T> positive = this->uniform(n, 0.2, 5.0);
  const std::vector<double> x64 = this->widen(x), y64 = this->widen(y);
  const std::vector<double> p64 = this->widen(positive);
  DeviceBuffer<T> dx = this->upload(x), dy = this->upload(y), dp = this->upload(positive);
  DeviceBuffer<T> dz = gpu.allocate(n);
  std::vector<double> want(n);

  gpu.axpy(n, T(0.75), dx.data(), dy.data());
  want = y64;
  cpu.axpy(n, 0.75, x64.data(), want.data());
  EXPECT_LE(relative_error(this->download(dy), want), tol) << "axpy";

  gpu.copy_from_host(y.data(), dy.data(), n);
  gpu.add_scaled(n, dx.data(), T(-1.25), dy.data(), dz.data());
  cpu.add_scaled(n, x64.data(), -1.25, y64.data(), want.data());
  EXPECT_LE(relative_error(this->download(dz), want), tol) << "add_scaled";
  gpu.add_scaled(n, dx.data(), T(-1.25), dy.data(), dy.data());  // z aliases y
  EXPECT_LE(relative_error(this->download(dy), want), tol) << "add_scaled in place";

  for (const bool divide : {false, true}) {
    gpu.scale_elementwise(n, dx.data(), dp.data(), divide, dz.data());
    cpu.scale_elementwise(n, x64.data(), p64.data(), divide, want.data());
    EXPECT_LE(relative_error(this->download(dz), want), tol) << "scale_elementwise " << divide;
  }

  gpu.inverse_sqrt(n, dp.data(), dz.data());
  cpu.inverse_sqrt(n, p64.data(), want.data());
  EXPECT_LE(relative_error(this->download(dz), want), tol) << "inverse_sqrt";
}

TYPED_TEST(CudaBackendTest, Reductions) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  // One element, one block, and more elements than the reduction grid has threads.
  for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, (std::size_t{1} << 20) + 17}) {
    SCOPED_TRACE(n);
    std::vector<T> x = this->random(n), y = this->random(n);
    x[n / 2] = T(3.5);  // a unique maximum
    const std::vector<double> x64 = this->widen(x), y64 = this->widen(y);
    DeviceBuffer<T> dx = this->upload(x), dy = this->upload(y);
    EXPECT_LE(relative_error(gpu.dot(n, dx.data(), dy.data()), cpu.dot(n, x64.data(), y64.data())),
              tol);
    EXPECT_EQ(gpu.max_abs(n, dx.data()), cpu.max_abs(n, x64.data()));
    EXPECT_TRUE(gpu.all_finite(n, dx.data()));
    for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity()}) {
      std::vector<T> z = x;
      z[n - 1] = bad;
      gpu.copy_from_host(z.data(), dx.data(), n);
      EXPECT_FALSE(gpu.all_finite(n, dx.data())) << bad;
    }
  }
  EXPECT_EQ(gpu.dot(0, nullptr, nullptr), 0.0);
  EXPECT_TRUE(gpu.all_finite(0, nullptr));
}

TYPED_TEST(CudaBackendTest, Gemm) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t m = 37, n = 29, k = 41;
  for (const Trans ta : {Trans::kNo, Trans::kYes}) {
    for (const Trans tb : {Trans::kNo, Trans::kYes}) {
      SCOPED_TRACE(::testing::Message()
                   << "ta=" << (ta == Trans::kYes) << " tb=" << (tb == Trans::kYes));
      // Stored shapes, with padded leading dimensions.
      const std::size_t a_rows = ta == Trans::kNo ? m : k, a_cols = ta == Trans::kNo ? k : m;
      const std::size_t b_rows = tb == Trans::kNo ? k : n, b_cols = tb == Trans::kNo ? n : k;
      const std::size_t lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 5;
      const std::vector<T> a = this->random(a_rows * lda), b = this->random(b_rows * ldb);
      const std::vector<T> c = this->random(m * ldc);
      DeviceBuffer<T> da = this->upload(a), db = this->upload(b), dc = this->upload(c);
      gpu.gemm(ta, tb, m, n, k, T(0.7), da.data(), lda, db.data(), ldb, T(-0.3), dc.data(), ldc);
      const std::vector<double> a64 = this->widen(a), b64 = this->widen(b);
      std::vector<double> want = this->widen(c);
      cpu.gemm(ta, tb, m, n, k, 0.7, a64.data(), lda, b64.data(), ldb, -0.3, want.data(), ldc);
      EXPECT_LE(relative_error(this->download(dc), want), kTolerance<T>);
    }
  }
}

TYPED_TEST(CudaBackendTest, Gemv) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t m = 53, n = 31, lda = n + 2;
  const std::vector<T> a = this->random(m * lda);
  const std::vector<double> a64 = this->widen(a);
  DeviceBuffer<T> da = this->upload(a);
  for (const Trans ta : {Trans::kNo, Trans::kYes}) {
    const std::size_t x_len = ta == Trans::kNo ? n : m, y_len = ta == Trans::kNo ? m : n;
    const std::vector<T> x = this->random(x_len), y = this->random(y_len);
    DeviceBuffer<T> dx = this->upload(x), dy = this->upload(y);
    gpu.gemv(ta, m, n, T(1.5), da.data(), lda, dx.data(), T(0.25), dy.data());
    const std::vector<double> x64 = this->widen(x);
    std::vector<double> want = this->widen(y);
    cpu.gemv(ta, m, n, 1.5, a64.data(), lda, x64.data(), 0.25, want.data());
    EXPECT_LE(relative_error(this->download(dy), want), kTolerance<T>) << (ta == Trans::kYes);
  }
}

TYPED_TEST(CudaBackendTest, SyrkAtaAndAat) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  {  // A = 1.3 JᵀJ + 0.5 A, J (67 × 23) with ldj = 27
    const std::size_t k = 67, n = 23, ldj = n + 4;
    const std::vector<T> j = this->random(k * ldj), c = this->random(n * n);
    DeviceBuffer<T> dj = this->upload(j), dc = this->upload(c);
    gpu.syrk_ata(n, k, T(1.3), dj.data(), ldj, T(0.5), dc.data());
    const std::vector<double> j64 = this->widen(j);
    std::vector<double> want = this->widen(c);
    cpu.syrk_ata(n, k, 1.3, j64.data(), ldj, 0.5, want.data());
    EXPECT_LE(relative_error(upper(this->download(dc), n), upper(want, n)), kTolerance<T>)
        << "syrk_ata";
  }
  {  // G = 0.8 JJᵀ − 0.2 G, J (19 × 45) with ldj = 47
    const std::size_t m = 19, n = 45, ldj = n + 2;
    const std::vector<T> j = this->random(m * ldj), c = this->random(m * m);
    DeviceBuffer<T> dj = this->upload(j), dc = this->upload(c);
    gpu.syrk_aat(m, n, T(0.8), dj.data(), ldj, T(-0.2), dc.data());
    const std::vector<double> j64 = this->widen(j);
    std::vector<double> want = this->widen(c);
    cpu.syrk_aat(m, n, 0.8, j64.data(), ldj, -0.2, want.data());
    EXPECT_LE(relative_error(upper(this->download(dc), m), upper(want, m)), kTolerance<T>)
        << "syrk_aat";
  }
}

// SolverOptions::tf32: a float backend forms A on TF32 tensor cores when asked (its inputs
// rounded to 10-bit mantissas: about 1e-3 of A where float32 keeps 1e-7; bounded at 4e-3) and
// says so in its report; off again, float32's bound holds.  A float64 backend refuses.  The error
// measured is printed for the run's log (whether cuBLAS's SYRK honours the math mode decides
// whether it is TF32's or float32's).
TYPED_TEST(CudaBackendTest, SyrkAtaOnTf32) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  if constexpr (!std::is_same_v<T, float>) {
    EXPECT_FALSE(gpu.use_tf32(true));
    EXPECT_EQ(gpu.normal_matrix_report().find("TF32"), std::string::npos);
  } else {
    const std::size_t k = 4096, n = 769, ldj = 772;
    const std::vector<T> j = this->random(k * ldj);
    DeviceBuffer<T> dj = this->upload(j), dc = gpu.allocate(n * n);
    const std::vector<double> j64 = this->widen(j);
    std::vector<double> want(n * n, 0.0);
    this->cpu_->syrk_ata(n, k, 1.0, j64.data(), ldj, 0.0, want.data());
    ASSERT_TRUE(gpu.use_tf32(true));
    gpu.syrk_ata(n, k, T(1), dj.data(), ldj, T(0), dc.data());
    const double tf32 = relative_error(upper(this->download(dc), n), upper(want, n));
    EXPECT_LE(tf32, 4e-3);
    EXPECT_NE(gpu.normal_matrix_report().find("TF32 tensor cores"), std::string::npos)
        << gpu.normal_matrix_report();
    ASSERT_TRUE(gpu.use_tf32(false));
    gpu.syrk_ata(n, k, T(1), dj.data(), ldj, T(0), dc.data());
    const double plain = relative_error(upper(this->download(dc), n), upper(want, n));
    EXPECT_LE(plain, kTolerance<T>);
    EXPECT_EQ(gpu.normal_matrix_report().find("TF32"), std::string::npos);
    std::printf(
        "SyrkAtaOnTf32: A's relative error %.3e with TF32, %.3e without (n = %zu, %zu "
        "rows)\n%s\n",
        tf32, plain, n, k, gpu.normal_matrix_report().c_str());
  }
}

TYPED_TEST(CudaBackendTest, SymmetrizeUpper) {
  using T = TypeParam;
  auto& cpu = *this->cpu_;
  for (const std::size_t n : {std::size_t{1}, std::size_t{31}, std::size_t{70}, kLargeN}) {
    const std::vector<T> a = this->random(n * n);
    DeviceBuffer<T> da = this->upload(a);
    this->gpu_->symmetrize_upper(n, da.data());
    std::vector<double> want = this->widen(a);
    cpu.symmetrize_upper(n, want.data());
    EXPECT_EQ(this->download(da), want) << n;
  }
}

// A = JᵀJ / rows + I (well conditioned), both triangles filled.
template <typename T>
std::vector<T> spd_matrix(const std::vector<T>& j, std::size_t rows, std::size_t n) {
  std::vector<T> a(n * n);
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = 0; q < n; ++q) {
      double s = p == q ? 1.0 : 0.0;
      for (std::size_t r = 0; r < rows; ++r)
        s += static_cast<double>(j[r * n + p]) * static_cast<double>(j[r * n + q]) /
             static_cast<double>(rows);
      a[p * n + q] = static_cast<T>(s);
    }
  return a;
}

TYPED_TEST(CudaBackendTest, CholeskyFactorAndSolve) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t n = 40, rows = 60;
  const std::vector<T> a = spd_matrix(this->random(rows * n), rows, n);
  const std::vector<T> b = this->random(n);
  DeviceBuffer<T> da = this->upload(a), db = this->upload(b);
  std::vector<double> factor = this->widen(a), x = this->widen(b);

  ASSERT_EQ(gpu.potrf(n, da.data()), 0);
  ASSERT_EQ(cpu.potrf(n, factor.data()), 0);
  EXPECT_LE(relative_error(upper(this->download(da), n), upper(factor, n)), kTolerance<T>);

  gpu.potrs(n, da.data(), db.data());
  cpu.potrs(n, factor.data(), x.data());
  EXPECT_LE(relative_error(this->download(db), x), kTolerance<T>);

  // Repeated factorizations (every λ retry) reuse the workspace.
  gpu.copy_from_host(a.data(), da.data(), n * n);
  EXPECT_EQ(gpu.potrf(n, da.data()), 0);
}

TYPED_TEST(CudaBackendTest, CholeskyInverseMatchesLapack) {
  // potri (64-bit Xpotrs against blocks of the identity) against LAPACK dpotri on the same
  // matrix.  n = 2 000 takes several blocks of columns (8 MiB each: 4 in double, 2 in float) and
  // its element-wise kernels wrap their grid-stride loops (n² > the 2²⁰ threads of a grid).
  // Rounding grows like √n: the tolerance is scaled from n = 37's.
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  for (const std::size_t n : {std::size_t{37}, std::size_t{2000}}) {
    SCOPED_TRACE(n);
    const std::size_t rows = 60;
    const std::vector<T> a = spd_matrix(this->random(rows * n), rows, n);
    DeviceBuffer<T> da = this->upload(a);
    std::vector<double> want = this->widen(a);
    ASSERT_EQ(gpu.potrf(n, da.data()), 0);
    ASSERT_EQ(gpu.potri(n, da.data()), 0);
    ASSERT_EQ(cpu.potrf(n, want.data()), 0);
    ASSERT_EQ(cpu.potri(n, want.data()), 0);
    const double scale = std::sqrt(static_cast<double>(n) / 37.0);
    EXPECT_LE(relative_error(upper(this->download(da), n), upper(want, n)),
              10 * scale * kTolerance<T>);
  }
}

TYPED_TEST(CudaBackendTest, CholeskyInverseReportsAZeroOnTheFactorsDiagonal) {
  // LAPACK's potri convention: info = k when the factor's k-th diagonal entry is zero.
  using T = TypeParam;
  const std::size_t n = 9;
  std::vector<T> factor = this->random(n * n, 0.5, 1.0);
  factor[5 * n + 5] = T(0);
  factor[7 * n + 7] = T(0);
  DeviceBuffer<T> da = this->upload(factor);
  std::vector<double> want = this->widen(factor);
  EXPECT_EQ(this->cpu_->potri(n, want.data()), 6);
  EXPECT_EQ(this->gpu_->potri(n, da.data()), 6);
}

TYPED_TEST(CudaBackendTest, CholeskyReportsTheFailingLeadingMinor) {
  using T = TypeParam;
  const std::size_t n = 8;
  std::vector<T> a(n * n);
  const std::vector<T> off = this->random(n * n, 0.001, 0.01);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      a[i * n + j] = i == j ? static_cast<T>(i == 3 ? -1.0 : 2.0 + static_cast<double>(i))
                            : off[std::min(i, j) * n + std::max(i, j)];
  DeviceBuffer<T> da = this->upload(a);
  std::vector<double> want = this->widen(a);
  const int cpu_info = this->cpu_->potrf(n, want.data());
  EXPECT_EQ(cpu_info, 4);
  EXPECT_EQ(this->gpu_->potrf(n, da.data()), cpu_info);
}

TYPED_TEST(CudaBackendTest, SymmetricEigendecomposition) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  const std::size_t n = 30;
  const std::vector<T> r = this->random(n * n);
  std::vector<T> a(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) a[i * n + j] = (r[i * n + j] + r[j * n + i]) / T(2);
  DeviceBuffer<T> da = this->upload(a);
  DeviceBuffer<T> dw = gpu.allocate(n);
  ASSERT_EQ(gpu.syevd(n, da.data(), dw.data()), 0);
  std::vector<double> cpu_vectors = this->widen(a), cpu_values(n);
  ASSERT_EQ(cpu.syevd(n, cpu_vectors.data(), cpu_values.data()), 0);

  const std::vector<double> w = this->download(dw);
  EXPECT_LE(relative_error(w, cpu_values), tol) << "eigenvalues";
  EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));

  // Rows of the result are eigenvectors: |A v − λ v| and |V Vᵀ − I| small relative to |A|.
  const std::vector<double> v = this->download(da);
  const std::vector<double> a64 = this->widen(a);
  const double norm_a = std::max(std::fabs(w.front()), std::fabs(w.back()));
  double residual = 0.0, orthogonality = 0.0;
  for (std::size_t e = 0; e < n; ++e) {
    for (std::size_t i = 0; i < n; ++i) {
      double av = 0.0;
      for (std::size_t j = 0; j < n; ++j) av += a64[i * n + j] * v[e * n + j];
      residual = std::max(residual, std::fabs(av - w[e] * v[e * n + i]));
    }
    for (std::size_t f = 0; f < n; ++f) {
      double d = 0.0;
      for (std::size_t i = 0; i < n; ++i) d += v[e * n + i] * v[f * n + i];
      orthogonality = std::max(orthogonality, std::fabs(d - (e == f ? 1.0 : 0.0)));
    }
  }
  EXPECT_LE(residual / norm_a, tol);
  EXPECT_LE(orthogonality, tol);
}

TYPED_TEST(CudaBackendTest, EigenvaluesAloneMatchLapack) {
  // bayesian's effective parameter count reads these.  A symmetric matrix with eigenvalues of
  // both signs; n = 2 000 as a real normal matrix of W2's size.  Normwise against LAPACK dsyevd in
  // double, the tolerance grown like √n from n = 30's; and the values of syevd (with vectors)
  // agree with them.
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  for (const std::size_t n : {std::size_t{30}, kLargeN}) {
    SCOPED_TRACE(n);
    const std::vector<T> r = this->random(n * n);
    std::vector<T> a(n * n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) a[i * n + j] = (r[i * n + j] + r[j * n + i]) / T(2);
    DeviceBuffer<T> da = this->upload(a), dw = gpu.allocate(n);
    gpu.fill(dw.data(), n, T(0));
    ASSERT_EQ(gpu.eigenvalues(n, da.data(), dw.data()), 0);
    std::vector<double> a64 = this->widen(a), want(n);
    ASSERT_EQ(cpu.eigenvalues(n, a64.data(), want.data()), 0);
    const std::vector<double> w = this->download(dw);
    const double tol = kTolerance<T> * std::sqrt(static_cast<double>(n) / 30.0);
    EXPECT_LE(relative_error(w, want), tol);
    EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
    EXPECT_LT(w.front(), 0.0);
    EXPECT_GT(w.back(), 0.0);

    DeviceBuffer<T> dv = this->upload(a), dw2 = gpu.allocate(n);
    ASSERT_EQ(gpu.syevd(n, dv.data(), dw2.data()), 0);
    EXPECT_LE(relative_error(this->download(dw2), w), tol);
  }
}

TYPED_TEST(CudaBackendTest, ConvertBetweenPrecisions) {
  // Mixed precision's widening of each J slice (float → double, exact) and δ's rounding
  // (double → float, to nearest as on the CPU), across two backends on the same device; and the
  // same-precision copy.  1.5 M elements.  Values span 2^-30 … 2^30 so rounding shows.
  using T = TypeParam;
  using Other = std::conditional_t<std::is_same_v<T, float>, double, float>;
  auto& gpu = *this->gpu_;
  auto other = make_cuda_backend<Other>(gpu.device_index());
  const std::size_t n = kLarge;
  std::vector<Other> src(n);
  std::uniform_real_distribution<double> mantissa(0.5, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (auto& x : src)
    x = static_cast<Other>((this->rng_() % 2 ? 1.0 : -1.0) *
                           std::ldexp(mantissa(this->rng_), exponent(this->rng_)));
  DeviceBuffer<Other> dsrc = other->allocate(n);
  other->copy_from_host(src.data(), dsrc.data(), n);
  other->synchronize();  // convert is ordered after this backend's work only (backend.h)
  DeviceBuffer<T> ddst = gpu.allocate(n);
  gpu.convert(n, dsrc.data(), ddst.data());
  std::vector<T> got(n), want(n);
  gpu.copy_to_host(ddst.data(), got.data(), n);
  for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<T>(src[i]);
  EXPECT_EQ(got, want) << "convert from the other precision";

  DeviceBuffer<T> dsame = gpu.allocate(n);
  gpu.convert(n, ddst.data(), dsame.data());
  std::vector<T> same(n);
  gpu.copy_to_host(dsame.data(), same.data(), n);
  EXPECT_EQ(same, want) << "convert within one precision";
}

TYPED_TEST(CudaBackendTest, DiagonalAndScalingOfTheNormalMatrix) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  for (const std::size_t n : {std::size_t{45}, kLargeN}) {
    SCOPED_TRACE(n);
    const std::vector<T> a = this->random(n * n, 0.1, 3.0);
    const std::vector<T> d = this->uniform(n, 0.5, 2.0), s = this->uniform(n, 0.3, 3.0);
    const std::vector<double> d64 = this->widen(d), s64 = this->widen(s);
    DeviceBuffer<T> da = this->upload(a), dd = this->upload(d), ds = this->upload(s);
    std::vector<double> want = this->widen(a);

    gpu.add_diagonal(n, da.data(), T(0.37), dd.data());
    cpu.add_diagonal(n, want.data(), 0.37, d64.data());
    EXPECT_LE(relative_error(this->download(da), want), tol) << "add_diagonal(d)";
    gpu.add_diagonal(n, da.data(), T(-1.5), nullptr);
    cpu.add_diagonal(n, want.data(), -1.5, nullptr);
    EXPECT_LE(relative_error(this->download(da), want), tol) << "add_diagonal(I)";

    gpu.scale_symmetric(n, da.data(), ds.data());
    cpu.scale_symmetric(n, want.data(), s64.data());
    EXPECT_LE(relative_error(this->download(da), want), tol) << "scale_symmetric";

    DeviceBuffer<T> dclamped = gpu.allocate(n);
    std::vector<double> clamped(n);
    gpu.clamped_diagonal(n, da.data(), T(-0.5), T(1.0), dclamped.data());
    cpu.clamped_diagonal(n, want.data(), -0.5, 1.0, clamped.data());
    EXPECT_LE(relative_error(this->download(dclamped), clamped), tol) << "clamped_diagonal";

    // A vector clamp in place (the first row of the matrix).
    gpu.clamp(n, da.data(), T(-0.5), T(1.0), da.data());
    cpu.clamp(n, want.data(), -0.5, 1.0, want.data());
    EXPECT_LE(relative_error(this->download(da), want), tol) << "clamp";
  }
}

TYPED_TEST(CudaBackendTest, PackAndUnpackUpper) {
  // What ranks all-reduce instead of A: the upper triangle, row by row.  Exact copies, so the
  // CPU's result must come back bit for bit; n = 2 000 has 2 M packed elements (the grid-stride
  // loop wraps, and the row is recovered from the packed index through a square root).
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{33}, kLargeN}) {
    SCOPED_TRACE(n);
    const std::size_t packed = n * (n + 1) / 2;
    const std::vector<T> a = this->random(n * n);
    DeviceBuffer<T> da = this->upload(a), dp = gpu.allocate(packed);
    gpu.fill(dp.data(), packed, T(0));
    gpu.pack_upper(n, da.data(), dp.data());
    const std::vector<double> a64 = this->widen(a);
    std::vector<double> want(packed);
    cpu.pack_upper(n, a64.data(), want.data());
    EXPECT_EQ(this->download(dp), want) << "pack_upper";

    // Unpacking into a different matrix writes the upper triangle and leaves the rest alone.
    const std::vector<T> other = this->random(n * n);
    DeviceBuffer<T> db = this->upload(other);
    gpu.unpack_upper(n, dp.data(), db.data());
    std::vector<double> unpacked = this->widen(other);
    cpu.unpack_upper(n, want.data(), unpacked.data());
    EXPECT_EQ(this->download(db), unpacked) << "unpack_upper";
  }
}

TYPED_TEST(CudaBackendTest, CopyUpperMatchesTheCpu) {
  // The Cholesky solver's copy of A on every λ retry: the upper triangle only, the strict lower
  // one of the destination untouched.  Exact copies: the CPU's result bit for bit; n = 2 000 makes
  // the grid-stride loop wrap.
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{33}, kLargeN}) {
    SCOPED_TRACE(n);
    const std::vector<T> a = this->random(n * n), other = this->random(n * n);
    DeviceBuffer<T> da = this->upload(a), db = this->upload(other);
    gpu.copy_upper(n, da.data(), db.data());
    std::vector<double> want = this->widen(other);
    const std::vector<double> a64 = this->widen(a);
    cpu.copy_upper(n, a64.data(), want.data());
    EXPECT_EQ(this->download(db), want);
  }
}

TYPED_TEST(CudaBackendTest, ColumnSumsOfSquaresOverRowChunks) {
  // diag(JᵀJ) as the CG preconditioner and Marquardt's D read it.  Shapes: W1's 61 columns over
  // 20 000 rows (many row chunks, a second pass), a tall thin slice (one column block), a wide
  // one whose column blocks alone fill the GPU (one chunk: the first pass writes the result), a
  // padded leading dimension, and no rows at all (zeros).  Twice each: the same bits both times.
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  struct Shape {
    std::size_t m, n, ldj;
  };
  for (const Shape& s : {Shape{20000, 61, 61}, Shape{100003, 3, 5}, Shape{40, 70001, 70001},
                         Shape{777, 1026, 1030}, Shape{0, 45, 45}}) {
    SCOPED_TRACE(::testing::Message() << s.m << " × " << s.n << ", ldj " << s.ldj);
    const std::vector<T> j = this->random(std::max<std::size_t>(s.m * s.ldj, 1));
    DeviceBuffer<T> dj = this->upload(j), out = gpu.allocate(s.n);
    gpu.fill(out.data(), s.n, T(-1));  // every column must be written
    gpu.column_sums_of_squares(s.m, s.n, dj.data(), s.ldj, out.data());
    const std::vector<double> first = this->download(out);
    const std::vector<double> j64 = this->widen(j);
    std::vector<double> want(s.n);
    cpu.column_sums_of_squares(s.m, s.n, j64.data(), s.ldj, want.data());
    if (s.m == 0) {
      EXPECT_EQ(first, want);
      continue;
    }
    EXPECT_LE(relative_error(first, want), kTolerance<T>);
    gpu.column_sums_of_squares(s.m, s.n, dj.data(), s.ldj, out.data());
    EXPECT_EQ(this->download(out), first) << "not reproducible";
  }
}

TYPED_TEST(CudaBackendTest, AddBiasRowsAndScaleRowGroups) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  for (const std::size_t rows : {std::size_t{33}, std::size_t{100003}}) {  // 1.7 M elements
    const std::size_t cols = 17;
    const std::vector<T> z = this->random(rows * cols), bias = this->random(cols);
    DeviceBuffer<T> dz = this->upload(z), db = this->upload(bias);
    gpu.add_bias_rows(rows, cols, db.data(), dz.data());
    std::vector<double> want = this->widen(z);
    const std::vector<double> b64 = this->widen(bias);
    cpu.add_bias_rows(rows, cols, b64.data(), want.data());
    EXPECT_LE(relative_error(this->download(dz), want), tol) << "add_bias_rows";
  }
  for (const std::size_t samples : {std::size_t{8}, std::size_t{50000}}) {  // 1.65 M elements
    const std::size_t group = 3, rows = group * samples, cols = 11;
    const std::vector<T> g = this->random(rows * cols), d = this->random(samples * cols);
    DeviceBuffer<T> dg = this->upload(g), dd = this->upload(d);
    gpu.scale_row_groups(rows, cols, group, dd.data(), dg.data());
    std::vector<double> want = this->widen(g);
    const std::vector<double> d64 = this->widen(d);
    cpu.scale_row_groups(rows, cols, group, d64.data(), want.data());
    EXPECT_LE(relative_error(this->download(dg), want), tol) << "scale_row_groups";
  }
}

TYPED_TEST(CudaBackendTest, DenseJacobianBlock) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  struct Shape {
    std::size_t group, samples, out, in;
  };
  // A small block, and 2 000 rows of a 40-20 layer (1.64 M entries: the loop wraps).
  for (const Shape& shape : {Shape{4, 5, 5, 7}, Shape{10, 200, 20, 40}}) {
    const std::size_t group = shape.group, samples = shape.samples, rows = group * samples;
    const std::size_t out = shape.out, in = shape.in;
    SCOPED_TRACE(rows);
    const std::size_t offset = 3, ldj = offset + out * (in + 1) + 6;  // the block sits inside J
    const std::vector<T> g = this->random(rows * out), a = this->random(samples * in);
    const std::vector<T> j = this->random(rows * ldj);  // columns outside the block must survive
    DeviceBuffer<T> dg = this->upload(g), da = this->upload(a), dj = this->upload(j);
    gpu.dense_jacobian(rows, out, in, group, dg.data(), da.data(), dj.data() + offset, ldj);
    const std::vector<double> g64 = this->widen(g), a64 = this->widen(a);
    std::vector<double> want = this->widen(j);
    cpu.dense_jacobian(rows, out, in, group, g64.data(), a64.data(), want.data() + offset, ldj);
    EXPECT_LE(relative_error(this->download(dj), want), kTolerance<T>);
  }
}

TYPED_TEST(CudaBackendTest, EveryActivationAndItsDerivative) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t n = kLarge;
  const std::vector<T> z = this->random(n, 0.05, 3.0);
  const std::vector<double> z64 = this->widen(z);
  DeviceBuffer<T> dz = this->upload(z), da = gpu.allocate(n), dd = gpu.allocate(n);
  std::vector<double> a(n), d(n);
  for (const auto& [f, name] : kActivationNames) {
    SCOPED_TRACE(std::string(name));
    gpu.activation_forward(f, n, dz.data(), da.data());
    cpu.activation_forward(f, n, z64.data(), a.data());
    EXPECT_LE(relative_error(this->download(da), a), kTolerance<T>) << "forward";
    gpu.activation_derivative(f, n, dz.data(), da.data(), dd.data());
    cpu.activation_derivative(f, n, z64.data(), a.data(), d.data());
    EXPECT_LE(relative_error(this->download(dd), d), kTolerance<T>) << "derivative";
  }
}

// Targets that suit each loss: probability vectors for the cross-entropies, [0.1, 0.9] for bce,
// and z plus an offset of at least 0.05 (so no residual sits at its guarded zero) otherwise.
template <typename T, typename Fixture>
std::vector<T> loss_targets(Fixture& fixture, LossKind kind, const std::vector<T>& z,
                            std::size_t batch, std::size_t c) {
  if (is_softmax_loss(kind)) {
    std::vector<T> y = fixture.random(batch * c, 0.1, 2.0);
    for (std::size_t b = 0; b < batch; ++b) {
      double sum = 0.0;
      for (std::size_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(y[b * c + k]));
      for (std::size_t k = 0; k < c; ++k)
        y[b * c + k] = static_cast<T>(std::exp(static_cast<double>(y[b * c + k])) / sum);
    }
    return y;
  }
  if (kind == LossKind::kBce) return fixture.uniform(batch * c, 0.1, 0.9);
  std::vector<T> y = fixture.random(batch * c, 0.05, 2.0);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(y[i] + z[i]);
  return y;
}

enum class Weighting { kNone, kOutputs, kSamples };

// Each sample's target row followed by its weight (every fifth weight 0).
template <typename T>
std::vector<T> with_sample_weights(const std::vector<T>& y, const std::vector<T>& w,
                                   std::size_t batch, std::size_t c) {
  std::vector<T> rows(batch * (c + 1));
  for (std::size_t b = 0; b < batch; ++b) {
    std::copy(y.begin() + static_cast<std::ptrdiff_t>(b * c),
              y.begin() + static_cast<std::ptrdiff_t>((b + 1) * c),
              rows.begin() + static_cast<std::ptrdiff_t>(b * (c + 1)));
    rows[b * (c + 1) + c] = b % 5 == 0 ? T(0) : w[b];
  }
  return rows;
}

TYPED_TEST(CudaBackendTest, EveryLossObjectiveAndLinearization) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  // A small batch; one larger than the reduction grid (grid-stride loop, grown scratch; 2.7 M
  // seed entries for the cross-entropies); ten classes (C² = 100 seeds per sample, 2 M entries).
  struct Case {
    std::size_t batch, c;
  };
  for (const Case& shape : {Case{37, 6}, Case{300001, 3}, Case{20000, 10}}) {
    const std::size_t batch = shape.batch, c = shape.c;
    for (const auto& [kind, name] : kLossNames) {
      if (c == 10 && !is_softmax_loss(kind)) continue;
      // mse's per-output weights; every loss's sample weights (0 to 3, every fifth 0), each
      // target row followed by its weight (core/loss_kind.h).
      for (const Weighting weighting :
           {Weighting::kNone, Weighting::kOutputs, Weighting::kSamples}) {
        if (weighting == Weighting::kOutputs && kind != LossKind::kMse) continue;
        if (weighting == Weighting::kSamples && c == 10) continue;
        const bool weighted = weighting == Weighting::kOutputs;
        const bool per_sample = weighting == Weighting::kSamples;
        SCOPED_TRACE(::testing::Message()
                     << name << (weighted ? " weighted" : "")
                     << (per_sample ? " sample-weighted" : "") << " batch " << batch);
        const std::vector<T> z = this->random(batch * c, 0.1, 2.5);
        std::vector<T> y = loss_targets(*this, kind, z, batch, c);
        if (per_sample) y = with_sample_weights(y, this->uniform(batch, 0.0, 3.0), batch, c);
        const std::vector<T> w = this->uniform(c, 0.5, 2.0);
        const std::vector<double> z64 = this->widen(z), y64 = this->widen(y);
        const std::vector<double> w64 = this->widen(w);
        DeviceBuffer<T> dz = this->upload(z), dy = this->upload(y), dw = this->upload(w);

        LossParams<T> loss;
        loss.kind = kind;
        loss.huber_delta = 0.8;  // errors span both of Huber's zones
        loss.weights = weighted ? dw.data() : nullptr;
        loss.draw_key = 12;  // cross_entropy_sampled: both backends draw the same classes
        loss.sample_weighted = per_sample;
        LossParams<double> loss64;
        loss64.kind = kind;
        loss64.draw_key = 12;
        loss64.huber_delta = 0.8;
        loss64.weights = weighted ? w64.data() : nullptr;
        loss64.sample_weighted = per_sample;

        const double f_cpu = cpu.loss_objective(loss64, batch, c, z64.data(), y64.data());
        EXPECT_LE(relative_error(gpu.loss_objective(loss, batch, c, dz.data(), dy.data()), f_cpu),
                  tol)
            << "objective";

        const std::size_t rows = batch * residuals_per_sample(kind, c);
        DeviceBuffer<T> dr = gpu.allocate(rows), ds = gpu.allocate(rows * c);
        std::vector<double> r(rows), s(rows * c);
        const double f_gpu =
            gpu.loss_linearize(loss, batch, c, dz.data(), dy.data(), dr.data(), ds.data());
        const double f_lin =
            cpu.loss_linearize(loss64, batch, c, z64.data(), y64.data(), r.data(), s.data());
        EXPECT_LE(relative_error(f_gpu, f_lin), tol) << "linearize F";
        const std::vector<double> residuals = this->download(dr), seeds = this->download(ds);
        EXPECT_LE(relative_error(residuals, r), tol) << "residuals";
        EXPECT_LE(relative_error(seeds, s), tol) << "seeds";
        // No sums across threads but F's fixed-order one: a second run gives the same bits.
        gpu.fill(dr.data(), rows, T(0));
        gpu.fill(ds.data(), rows * c, T(0));
        EXPECT_EQ(gpu.loss_linearize(loss, batch, c, dz.data(), dy.data(), dr.data(), ds.data()),
                  f_gpu);
        EXPECT_EQ(this->download(dr), residuals);
        EXPECT_EQ(this->download(ds), seeds);
      }
    }
  }
}

// The *_into calls leave on the device what the reading calls return (the same bits), checked
// against the fp64 CPU backend; only read_scalars reads, as on the CPU (tests/backend/).
TYPED_TEST(CudaBackendTest, ScalarsLeftOnTheDeviceAndReadTogether) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const double tol = kTolerance<T>;
  // Six slots: the last call below writes its three figures from slot 3 on (five slots made
  // compute-sanitizer's memcheck report an out-of-bounds write on the H200, 2026-11-27).
  DeviceBuffer<double> out(gpu.memory(), 6);
  double host[6];
  for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, kLarge}) {
    SCOPED_TRACE(n);
    std::vector<T> x = this->random(n), y = this->random(n);
    x[n / 2] = T(3.5);  // a unique maximum
    const std::vector<double> x64 = this->widen(x), y64 = this->widen(y);
    DeviceBuffer<T> dx = this->upload(x), dy = this->upload(y);
    const std::uint64_t before = gpu.host_reads();
    gpu.dot_into(n, dx.data(), dy.data(), out.data());
    gpu.vector_norms(n, dx.data(), 1, out.data() + 1);
    gpu.dot_into(n, dx.data(), dx.data(), out.data() + 4);
    EXPECT_EQ(gpu.host_reads(), before);
    gpu.read_scalars(out.data(), host, 5);
    EXPECT_EQ(gpu.host_reads(), before + 1);
    EXPECT_LE(relative_error(host[0], cpu.dot(n, x64.data(), y64.data())), tol);
    EXPECT_EQ(host[1], 0.0);
    EXPECT_EQ(host[2], cpu.max_abs(n, x64.data()));
    EXPECT_LE(relative_error(host[3], cpu.dot(n, x64.data(), x64.data())), tol);
    EXPECT_EQ(host[0], gpu.dot(n, dx.data(), dy.data()));
    EXPECT_EQ(host[3], host[4]);  // Σ x² summed as dot sums it
    x[0] = std::numeric_limits<T>::quiet_NaN();
    x[n - 1] = -std::numeric_limits<T>::infinity();
    gpu.copy_from_host(x.data(), dx.data(), n);
    gpu.vector_norms(n, dx.data(), 1, out.data());
    gpu.read_scalars(out.data(), host, 3);
    EXPECT_EQ(host[0], n == 1 ? 1.0 : 2.0);
    EXPECT_EQ(host[1], std::numeric_limits<double>::infinity());  // NaN skipped, ∞ kept
  }
  // A matrix's diagonal (stride n + 1), off-diagonal infinities unread; n = 0 gives zeros.
  const std::size_t n = 300;
  std::vector<T> a = this->random(n * n);
  a[1] = std::numeric_limits<T>::infinity();
  a[7 * n + 7] = std::numeric_limits<T>::quiet_NaN();
  std::vector<double> diagonal;
  for (std::size_t i = 0; i < n; ++i)
    if (i != 7) diagonal.push_back(static_cast<double>(a[i * n + i]));
  DeviceBuffer<T> da = this->upload(a);
  gpu.vector_norms(n, da.data(), n + 1, out.data());
  gpu.vector_norms(0, da.data(), 1, out.data() + 3);
  gpu.read_scalars(out.data(), host, 6);
  EXPECT_EQ(host[0], 1.0);
  EXPECT_EQ(host[1], cpu.max_abs(diagonal.size(), diagonal.data()));
  EXPECT_TRUE(std::isnan(host[2]));
  EXPECT_EQ(host[3], 0.0);
  EXPECT_EQ(host[4], 0.0);
  EXPECT_EQ(host[5], 0.0);
}

// axpy_if_ratio_holds on the device against the CPU backend's (tests/backend/host_reads_test.cpp
// checks that one against exact bounds): the same decisions, including the boundary ‖a‖ = 3.75
// and non-finite norms, y within a rounding of the CPU's, the outcome written for n = 0, no read.
TYPED_TEST(CudaBackendTest, GeodesicRatioTestOnTheDevice) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto cpu = make_cpu_backend<T>();
  const std::vector<T> x = this->random(kLarge), y0 = this->random(kLarge);
  DeviceBuffer<double> scalars(gpu.memory(), 7);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const double a_squares : {14.0625, 14.0626, 1e-30, nan, inf}) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1000}, kLarge}) {
      SCOPED_TRACE(a_squares);
      SCOPED_TRACE(n);
      const double host_in[7] = {0, 0, a_squares, 0, 0, 100, -1};
      gpu.write_scalars(host_in, scalars.data(), 7);
      DeviceBuffer<T> dx = this->upload(x), dy = this->upload(y0);
      std::vector<T> want = y0;
      double cpu_scalars[7] = {0, 0, a_squares, 0, 0, 100, -1};
      cpu->axpy_if_ratio_holds(n, T(0.5), x.data(), want.data(), cpu_scalars, cpu_scalars + 3, 1,
                               0.75, cpu_scalars + 6);
      const std::uint64_t before = gpu.host_reads();
      gpu.axpy_if_ratio_holds(n, T(0.5), dx.data(), dy.data(), scalars.data(), scalars.data() + 3,
                              1, 0.75, scalars.data() + 6);
      EXPECT_EQ(gpu.host_reads(), before);
      double out[7];
      gpu.read_scalars(scalars.data(), out, 7);
      EXPECT_EQ(out[6], cpu_scalars[6]);
      if (!std::isnan(a_squares)) {
        EXPECT_EQ(out[2], a_squares);  // as write_scalars wrote it
      }
      EXPECT_LE(relative_error(this->download(dy), this->widen(want)), kTolerance<T>);
    }
  }
}

TYPED_TEST(CudaBackendTest, CholeskyStatusLeftOnTheDevice) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  const std::size_t n = 40, rows = 60;
  const std::vector<T> spd = spd_matrix(this->random(rows * n), rows, n);
  DeviceBuffer<double> status(gpu.memory(), 3);
  for (const std::size_t bad : {n, std::size_t{3}}) {
    std::vector<T> a = spd;
    if (bad < n) a[bad * n + bad] = T(-1);
    std::vector<double> want = this->widen(a);
    const int cpu_info = this->cpu_->potrf(n, want.data());
    EXPECT_EQ(cpu_info, bad < n ? static_cast<int>(bad) + 1 : 0);
    DeviceBuffer<T> da = this->upload(a), db = this->upload(this->random(n));
    const std::uint64_t before = gpu.host_reads();
    gpu.potrf_into(n, da.data(), status.data());
    gpu.potrs(n, da.data(), db.data());  // after a failed factorization too: no error
    gpu.potrf_into(0, da.data(), status.data() + 1);
    EXPECT_EQ(gpu.host_reads(), before);
    double host[2] = {-1, -1};
    gpu.read_scalars(status.data(), host, 2);
    EXPECT_EQ(host[0], static_cast<double>(cpu_info));
    EXPECT_EQ(host[1], 0.0);
    if (bad == n) {
      EXPECT_LE(relative_error(upper(this->download(da), n), upper(want, n)), kTolerance<T>);
    }
  }
}

// DeviceQueue::record (issue 36: an LM attempt launched as one graph).  lmtrain's kernels and
// cuBLAS, captured and replayed, give the eager bits without a host read; a replay reads the
// buffers as they are when it runs (a new x), not as they were when recorded.
TYPED_TEST(CudaBackendTest, RecordedWorkReplaysWithTheEagerBits) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  const std::size_t n = 769, m = 1000;
  const std::vector<T> x0 = this->random(n), x1 = this->random(n);
  DeviceBuffer<T> dx = this->upload(x0), dy = this->upload(this->random(n));
  DeviceBuffer<T> dj = this->upload(this->random(m * n));
  DeviceBuffer<T> z = gpu.allocate(n), w = gpu.allocate(m);
  DeviceBuffer<double> scalars(gpu.memory(), 4);
  const auto work = [&] {
    gpu.add_scaled(n, dx.data(), T(-0.5), dy.data(), z.data());
    gpu.gemv(Trans::kNo, m, n, T(1), dj.data(), n, z.data(), T(0), w.data());
    gpu.vector_norms(m, w.data(), 1, scalars.data());
    gpu.dot_into(n, dx.data(), z.data(), scalars.data() + 3);
  };
  const double zeros[4] = {0, 0, 0, 0};
  const auto outputs = [&] {
    std::vector<double> s(4);
    gpu.read_scalars(scalars.data(), s.data(), 4);
    std::vector<double> out = this->download(w);
    out.insert(out.end(), s.begin(), s.end());
    gpu.fill(w.data(), m, T(0));  // what a replay must write again
    gpu.write_scalars(zeros, scalars.data(), 4);
    return out;
  };
  work();
  const std::vector<double> eager0 = outputs();
  std::string why;
  const std::uint64_t reads = gpu.host_reads();
  const std::unique_ptr<QueueRecording> recording = gpu.record(work, why);
  ASSERT_NE(recording, nullptr) << why;
  EXPECT_EQ(gpu.host_reads(), reads);
  EXPECT_EQ(outputs(), std::vector<double>(m + 4, 0.0));  // recorded, not run
  recording->replay();
  EXPECT_EQ(outputs(), eager0);
  gpu.copy_from_host(x1.data(), dx.data(), n);
  work();
  const std::vector<double> eager1 = outputs();
  EXPECT_NE(eager1, eager0);
  recording->replay();
  recording->replay();
  EXPECT_EQ(outputs(), eager1);
}

// cuSOLVER's factorization and solve under capture, λ added from a device double as a recorded
// attempt must (add_diagonal_from; eagerly the host λ's bits): recorded once and replayed at two
// λ with each λ's eager bits, or refused with a reason, nothing of it run and the queue as usable
// as before.  Which one this device gave is printed for the GPU run's log: whether an attempt's
// graph can hold its solve (CuPy listed cuSOLVER as refusing capture as of CUDA 11.5).
TYPED_TEST(CudaBackendTest, CholeskySolveRecordedOrRefusedWithAReason) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  const std::size_t n = 769, rows = 800;
  DeviceBuffer<T> a = this->upload(spd_matrix(this->random(rows * n), rows, n));
  DeviceBuffer<T> g = this->upload(this->random(n));
  DeviceBuffer<T> factor = gpu.allocate(n * n), x = gpu.allocate(n);
  DeviceBuffer<double> status(gpu.memory(), 1), lambda(gpu.memory(), 1);
  const auto solve = [&](const std::function<void()>& damp) {
    gpu.copy_upper(n, a.data(), factor.data());
    damp();
    gpu.potrf_into(n, factor.data(), status.data());
    gpu.copy(g.data(), x.data(), n);
    gpu.potrs(n, factor.data(), x.data());
  };
  const auto work = [&] {
    solve([&] { gpu.add_diagonal_from(n, factor.data(), lambda.data(), nullptr); });
  };
  const double minus_one = -1;
  const auto outputs = [&] {
    double s = 0;
    gpu.read_scalars(status.data(), &s, 1);
    std::vector<double> out = this->download(x);
    out.push_back(s);
    gpu.fill(x.data(), n, T(0));
    gpu.write_scalars(&minus_one, status.data(), 1);
    return out;
  };
  const auto set_lambda = [&](double l) { gpu.write_scalars(&l, lambda.data(), 1); };
  std::vector<std::vector<double>> eager;
  for (const double l : {1e-3, 0.7}) {
    solve([&] { gpu.add_diagonal(n, factor.data(), static_cast<T>(l), nullptr); });
    eager.push_back(outputs());
    ASSERT_EQ(eager.back().back(), 0.0);
    set_lambda(l);
    work();
    EXPECT_EQ(outputs(), eager.back()) << "λ " << l;  // from the device: the host λ's bits
  }
  ASSERT_NE(eager[0], eager[1]);
  std::string why;
  set_lambda(1e-3);
  const std::unique_ptr<QueueRecording> recording = gpu.record(work, why);
  std::vector<double> none(n, 0.0);  // recorded or refused: not run
  none.push_back(-1);
  EXPECT_EQ(outputs(), none);
  if (recording) {
    std::cout << "[ record ] cuSOLVER potrf/potrs (n = " << n << ") captured and replayed\n";
    recording->replay();
    EXPECT_EQ(outputs(), eager[0]);
    set_lambda(0.7);
    recording->replay();
    EXPECT_EQ(outputs(), eager[1]);
  } else {
    std::cout << "[ record ] cuSOLVER potrf/potrs (n = " << n << ") refused: " << why << "\n";
    EXPECT_EQ(why.rfind(gpu.name() + ": ", 0), 0u) << why;  // the backend, then the reason
    work();
    EXPECT_EQ(outputs(), eager[0]);
  }
}

TYPED_TEST(CudaBackendTest, LossObjectivesLeftOnTheDevice) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t batch = 5000, c = 4;
  for (const LossKind kind : {LossKind::kMse, LossKind::kCrossEntropy}) {
    SCOPED_TRACE(to_string(kind));
    const std::vector<T> z = this->random(batch * c, 0.1, 2.5);
    const std::vector<T> y = loss_targets(*this, kind, z, batch, c);
    const std::vector<double> z64 = this->widen(z), y64 = this->widen(y);
    DeviceBuffer<T> dz = this->upload(z), dy = this->upload(y);
    LossParams<T> loss;
    loss.kind = kind;
    LossParams<double> loss64;
    loss64.kind = kind;
    const std::size_t rows = batch * residuals_per_sample(kind, c);
    DeviceBuffer<T> dr = gpu.allocate(rows), ds = gpu.allocate(rows * c);
    DeviceBuffer<double> out(gpu.memory(), 3);
    const std::uint64_t before = gpu.host_reads();
    gpu.loss_objective_into(loss, batch, c, dz.data(), dy.data(), out.data());
    gpu.loss_linearize_into(loss, batch, c, dz.data(), dy.data(), dr.data(), ds.data(),
                            out.data() + 1);
    gpu.loss_objective_into(loss, 0, c, dz.data(), dy.data(), out.data() + 2);
    EXPECT_EQ(gpu.host_reads(), before);
    double host[3];
    gpu.read_scalars(out.data(), host, 3);
    EXPECT_LE(relative_error(host[0], cpu.loss_objective(loss64, batch, c, z64.data(), y64.data())),
              kTolerance<T>);
    EXPECT_EQ(host[0], gpu.loss_objective(loss, batch, c, dz.data(), dy.data()));
    EXPECT_EQ(host[1],
              gpu.loss_linearize(loss, batch, c, dz.data(), dy.data(), dr.data(), ds.data()));
    EXPECT_EQ(host[2], 0.0);
  }
}

TYPED_TEST(CudaBackendTest, RunsOnACallersStreamAndLeavesItAlive) {
  // make_cuda_backend_on_stream (lmtrain.torch hands over torch's current stream): the backend
  // queues on that stream, computes what it computes on its own, and leaves the stream to its
  // owner — here another backend's, which works on after the borrower is gone.
  using T = TypeParam;
  auto& owner = *this->gpu_;
  const std::vector<T> x = this->random(kLarge);
  {
    auto borrower = make_cuda_backend_on_stream<T>(0, owner.native_stream());
    EXPECT_EQ(borrower->native_stream(), owner.native_stream());
    DeviceBuffer<T> d = borrower->allocate(x.size());
    borrower->copy_from_host(x.data(), d.data(), x.size());
    borrower->axpy(x.size(), T(1), d.data(), d.data());  // d = 2x, exactly
    std::vector<T> back(x.size());
    borrower->copy_to_host(d.data(), back.data(), back.size());
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], T(2) * x[i]) << i;
  }
  DeviceBuffer<T> d = this->upload(x);
  EXPECT_EQ(this->download(d), this->widen(x));
}

TYPED_TEST(CudaBackendTest, RunsOnTheLegacyDefaultStream) {
  // torch's default stream is the legacy default stream, whose cuda_stream torch reads as 0;
  // lmtrain.torch hands it over as cudaStreamLegacy ((void*)1).  The backend borrows it: its
  // work is ordered with whatever else the process queues there.
  using T = TypeParam;
  void* legacy = reinterpret_cast<void*>(std::uintptr_t{1});  // cudaStreamLegacy
  auto borrower = make_cuda_backend_on_stream<T>(0, legacy);
  EXPECT_EQ(borrower->native_stream(), legacy);
  const std::vector<T> x = this->random(kLarge);
  DeviceBuffer<T> d = borrower->allocate(x.size());
  borrower->copy_from_host(x.data(), d.data(), x.size());
  borrower->axpy(x.size(), T(1), d.data(), d.data());
  std::vector<T> back(x.size());
  borrower->copy_to_host(d.data(), back.data(), back.size());
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], T(2) * x[i]) << i;
}

// Without a device (every CI machine): the null stream and a missing device are refused with
// the reason, before any stream is touched.
TEST(CudaBackendOnStream, RefusesTheNullStreamAndAMissingDevice) {
  if (!cuda_backend_built()) {
    EXPECT_THROW((void)make_cuda_backend_on_stream<float>(0, nullptr), BackendError);
    return;
  }
  EXPECT_THROW((void)make_cuda_backend_on_stream<float>(0, nullptr), InvalidArgument);
  if (cuda_device_count() == 0) {
    int not_a_stream = 0;
    EXPECT_THROW((void)make_cuda_backend_on_stream<double>(0, &not_a_stream), BackendError);
  }
}

}  // namespace
}  // namespace lmtrain
