// DeviceQueue::host_reads on the CPU backend: every call that returns device data to the host
// counts one read, whatever it returns, and the calls that only queue work count none — the
// contract that lets CI check a GPU's synchronizations on a machine without one.  And the *_into
// calls, which leave their scalars on the device for one read_scalars, against sums in double
// and against the calls that return the same figures (tests/cuda/ checks the CUDA backend's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/rng.h"
#include "support/recording_backend.h"

namespace lmtrain {
namespace {

// Reads counted while `call` runs.
std::uint64_t reads_of(const DeviceQueue& device, const std::function<void()>& call) {
  const std::uint64_t before = device.host_reads();
  call();
  return device.host_reads() - before;
}

TEST(HostReads, EveryCallThatReturnsDeviceDataCountsOneAndQueuedWorkNone) {
  auto b = make_cpu_backend<double>();
  constexpr std::size_t n = 5;
  Rng rng(11);
  std::vector<double> x(n), y(n), host(n), w(n), spd(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = rng.normal();
    y[i] = rng.normal();
  }
  // A diagonally dominant, hence positive definite, upper triangle.
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i; j < n; ++j) spd[i * n + j] = i == j ? 10.0 + rng.uniform(0, 1) : 0.5;
  std::vector<double> a = spd;
  EXPECT_EQ(reads_of(*b, [&] { b->copy_to_host(x.data(), host.data(), n); }), 1u);
  EXPECT_EQ(reads_of(*b, [&] { (void)b->dot(n, x.data(), y.data()); }), 1u);
  EXPECT_EQ(reads_of(*b, [&] { (void)b->max_abs(n, x.data()); }), 1u);
  EXPECT_EQ(reads_of(*b, [&] { (void)b->all_finite(n, x.data()); }), 1u);
  EXPECT_EQ(reads_of(*b, [&] { EXPECT_EQ(b->potrf(n, a.data()), 0); }), 1u);
  EXPECT_EQ(reads_of(*b, [&] { b->potrs(n, a.data(), host.data()); }), 0u);
  EXPECT_EQ(reads_of(*b, [&] { EXPECT_EQ(b->potri(n, a.data()), 0); }), 1u);
  a = spd;
  EXPECT_EQ(reads_of(*b, [&] { EXPECT_EQ(b->eigenvalues(n, a.data(), w.data()), 0); }), 1u);
  a = spd;
  EXPECT_EQ(reads_of(*b, [&] { EXPECT_EQ(b->syevd(n, a.data(), w.data()), 0); }), 1u);
  const LossParams<double> mse{};
  std::vector<double> r(n), seeds(n);
  EXPECT_EQ(reads_of(*b, [&] { (void)b->loss_objective(mse, n, 1, x.data(), y.data()); }), 1u);
  EXPECT_EQ(
      reads_of(
          *b,
          [&] { (void)b->loss_linearize(mse, n, 1, x.data(), y.data(), r.data(), seeds.data()); }),
      1u);
  EXPECT_EQ(reads_of(*b,
                     [&] {
                       b->copy_from_host(x.data(), host.data(), n);
                       b->axpy(n, 2.0, x.data(), host.data());
                       b->gemv(Trans::kNo, 1, n, 1.0, x.data(), n, y.data(), 0.0, host.data());
                       b->add_diagonal(n, a.data(), 1.0, nullptr);
                     }),
            0u);
}

template <typename T>
class DeviceScalars : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DeviceScalars, Precisions);

// n above the backend's serial threshold (2¹⁷) too, where sums run in blocks on threads.
TYPED_TEST(DeviceScalars, DotAndNormsMatchSumsInDoubleAndDotsBits) {
  using T = TypeParam;
  auto b = make_cpu_backend<T>();
  Rng rng(5);
  for (const std::size_t n : {std::size_t{1}, std::size_t{769}, (std::size_t{1} << 17) + 9}) {
    SCOPED_TRACE(n);
    std::vector<T> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<T>(rng.normal());
      y[i] = static_cast<T>(rng.normal());
    }
    double xy = 0, xx = 0, largest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(x[i]);
      xy += v * static_cast<double>(y[i]);
      xx += v * v;
      largest = std::max(largest, std::fabs(v));
    }
    std::vector<double> out(4, -1.0);
    const std::uint64_t before = b->host_reads();
    b->dot_into(n, x.data(), y.data(), &out[0]);
    b->vector_norms(n, x.data(), 1, &out[1]);
    EXPECT_EQ(b->host_reads(), before);  // nothing read yet
    std::vector<double> host(4);
    b->read_scalars(out.data(), host.data(), 4);
    EXPECT_EQ(b->host_reads(), before + 1);
    EXPECT_NEAR(host[0], xy, 1e-12 * static_cast<double>(n));
    EXPECT_EQ(host[1], 0.0);
    EXPECT_EQ(host[2], largest);
    EXPECT_NEAR(host[3], xx, 1e-12 * xx);
    // The bits the reading calls return: a norm taken here decides what dot's decided.
    EXPECT_EQ(host[0], b->dot(n, x.data(), y.data()));
    EXPECT_EQ(host[3], b->dot(n, x.data(), x.data()));
  }
}

// add_diagonal_from (λ in a device double, for a recorded attempt): add_diagonal's bits with
// λ rounded to T once — 0.1 and 1e-3 not representable, 1e-50 zero in float, a denormal in
// neither —, D or none, without a read; each diagonal entry within T's rounding of a_ii + λd_i
// in double, the off-diagonal untouched.
TYPED_TEST(DeviceScalars, AddDiagonalFromTheDeviceHasTheHostLambdasBits) {
  using T = TypeParam;
  auto b = make_cpu_backend<T>();
  Rng rng(9);
  const std::size_t n = 37;
  std::vector<T> a0(n * n), d(n);
  for (T& v : a0) v = static_cast<T>(rng.normal());
  for (T& v : d) v = static_cast<T>(1.0 + rng.uniform());
  for (const double lambda : {0.1, 1e-3, 3.0, 1e-50}) {
    for (const T* dd : {static_cast<const T*>(nullptr), static_cast<const T*>(d.data())}) {
      SCOPED_TRACE(lambda);
      SCOPED_TRACE(dd == nullptr ? "D = I" : "D");
      std::vector<T> want = a0, got = a0;
      b->add_diagonal(n, want.data(), static_cast<T>(lambda), dd);
      double slot = 0;
      b->write_scalars(&lambda, &slot, 1);
      const std::uint64_t before = b->host_reads();
      b->add_diagonal_from(n, got.data(), &slot, dd);
      EXPECT_EQ(b->host_reads(), before);
      EXPECT_EQ(got, want);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          const double a = static_cast<double>(a0[i * n + j]);
          if (i != j) {
            EXPECT_EQ(got[i * n + j], a0[i * n + j]);
            continue;
          }
          const double added = lambda * (dd ? static_cast<double>(d[i]) : 1.0);
          const double eps = std::numeric_limits<T>::epsilon();
          EXPECT_NEAR(static_cast<double>(got[i * n + j]), a + added,
                      2 * eps * (std::fabs(a) + added))
              << i;
        }
    }
  }
}

TYPED_TEST(DeviceScalars, NormsCountNonFiniteValuesAndReadAStridedDiagonal) {
  using T = TypeParam;
  auto b = make_cpu_backend<T>();
  constexpr std::size_t n = 6;
  Rng rng(8);
  std::vector<T> a(n * n);
  for (T& v : a) v = static_cast<T>(rng.uniform(0.5, 2));
  a[0] = T(-7);                                        // the diagonal's largest |a_ii|
  a[2 * n + 2] = std::numeric_limits<T>::quiet_NaN();  // skipped by the maximum
  a[1] = std::numeric_limits<T>::infinity();           // off the diagonal: not read
  double largest = 0, squares = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i == 2) continue;
    const double v = static_cast<double>(a[i * n + i]);
    largest = std::max(largest, std::fabs(v));
    squares += v * v;
  }
  double out[3];
  b->vector_norms(n, a.data(), n + 1, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], largest);
  EXPECT_TRUE(std::isnan(out[2]));
  a[2 * n + 2] = T(0.25);
  b->vector_norms(n, a.data(), n + 1, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_NEAR(out[2], squares + 0.0625, 1e-6 * squares);
  // Every entry of row 0: −7, +∞ and four finite values.
  b->vector_norms(n, a.data(), 1, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], std::numeric_limits<double>::infinity());
  b->vector_norms(0, a.data(), 1, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 0.0);
}

// The status potrf would return, and its (partial) factor, for a positive definite matrix and
// for one whose third leading minor is not (a negative diagonal entry among small off-diagonal
// ones).
TYPED_TEST(DeviceScalars, PotrfLeavesPotrfsStatusAndFactor) {
  using T = TypeParam;
  auto b = make_cpu_backend<T>();
  constexpr std::size_t n = 5;
  Rng rng(13);
  std::vector<T> spd(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      spd[i * n + j] = i == j ? static_cast<T>(4 + i) : static_cast<T>(rng.uniform(0.01, 0.1));
  for (const std::size_t bad : {n, std::size_t{2}}) {
    std::vector<T> a = spd;
    if (bad < n) a[bad * n + bad] = T(-1);
    std::vector<T> factor = a;
    const std::uint64_t before = b->host_reads();
    double status = -1;
    b->potrf_into(n, a.data(), &status);
    EXPECT_EQ(b->host_reads(), before);
    EXPECT_EQ(status, bad < n ? static_cast<double>(bad + 1) : 0.0);
    EXPECT_EQ(static_cast<double>(b->potrf(n, factor.data())), status);
    EXPECT_EQ(a, factor);
  }
}

// Geodesic acceleration's ratio test decided on the device (axpy_if_ratio_holds): the
// correction a is kept when ‖a‖ is finite and 2‖a‖ ≤ ratio·lr·‖δ‖.  Norms written as exact
// squares (‖δ‖ = 10 or 20, lr = 1 or ½, ratio 0.75: the bound ‖a‖ ≤ 3.75 = √14.0625 exactly),
// so that the boundary itself is tested; y += αx then has axpy's bits, and nothing is read.
TYPED_TEST(DeviceScalars, GeodesicRatioTestKeepsOrRefusesWithoutARead) {
  using T = TypeParam;
  auto b = make_cpu_backend<T>();
  constexpr std::size_t n = 7;
  Rng rng(5);
  std::vector<T> x(n), y0(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<T>(rng.normal());
    y0[i] = static_cast<T>(rng.normal());
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    double a_squares, delta_squares, lr;
    bool kept;
  };
  for (const Case& c :
       {Case{14.0625, 100, 1, true}, Case{14.0626, 100, 1, false}, Case{1e-30, 100, 1, true},
        Case{14.0625, 400, 0.5, true}, Case{14.07, 400, 0.5, false}, Case{nan, 100, 1, false},
        Case{inf, 100, 1, false}, Case{0, 0, 1, true}, Case{1, 0, 1, false}}) {
    SCOPED_TRACE(c.a_squares);
    double scalars[8] = {0, 0, c.a_squares, 0, 0, c.delta_squares, -1, 0};
    double device[8];
    b->write_scalars(scalars, device, 8);
    std::vector<T> y = y0, want = y0;
    if (c.kept) b->axpy(n, T(0.5), x.data(), want.data());
    const std::uint64_t before = b->host_reads();
    b->axpy_if_ratio_holds(n, T(0.5), x.data(), y.data(), device, device + 3, c.lr, 0.75,
                           device + 6);
    EXPECT_EQ(b->host_reads(), before);
    EXPECT_EQ(device[6], c.kept ? 1.0 : 0.0);
    EXPECT_EQ(y, want);
  }
  // n = 0 still writes the outcome.
  double device[7] = {0, 0, 1, 0, 0, 100, -1};
  b->axpy_if_ratio_holds(0, T(1), x.data(), y0.data(), device, device + 3, 1, 0.75, device + 6);
  EXPECT_EQ(device[6], 1.0);
}

TYPED_TEST(DeviceScalars, LossesLeaveTheObjectiveTheyReturn) {
  using T = TypeParam;
  auto b = make_cpu_backend<T>();
  constexpr std::size_t batch = 300, c = 2;
  Rng rng(21);
  std::vector<T> z(batch * c), y(batch * c), r(batch * c), seeds(batch * c * c);
  for (std::size_t i = 0; i < z.size(); ++i) {
    z[i] = static_cast<T>(rng.normal());
    y[i] = static_cast<T>(rng.normal());
  }
  double half_squares = 0;  // mse: F = ½Σ(z − y)²
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double e = static_cast<double>(z[i]) - static_cast<double>(y[i]);
    half_squares += 0.5 * e * e;
  }
  const LossParams<T> mse{};
  double f[2] = {-1, -1};
  const std::uint64_t before = b->host_reads();
  b->loss_objective_into(mse, batch, c, z.data(), y.data(), &f[0]);
  b->loss_linearize_into(mse, batch, c, z.data(), y.data(), r.data(), seeds.data(), &f[1]);
  EXPECT_EQ(b->host_reads(), before);
  EXPECT_NEAR(f[0], half_squares, 1e-12 * half_squares);
  EXPECT_EQ(f[0], b->loss_objective(mse, batch, c, z.data(), y.data()));
  EXPECT_EQ(f[1], b->loss_linearize(mse, batch, c, z.data(), y.data(), r.data(), seeds.data()));
  for (std::size_t i = 0; i < z.size(); ++i)
    EXPECT_EQ(r[i], static_cast<T>(static_cast<double>(z[i]) - static_cast<double>(y[i])));
}

// DeviceQueue::record on the CPU, which runs work as it is queued: nothing is recorded, `work`
// is not called (the caller runs it itself), and the reason names the backend.  The CUDA
// backend's recording is checked in tests/cuda/ (RecordedWorkReplaysWithTheEagerBits).
TEST(DeviceQueueRecord, TheCpuRecordsNothingAndRunsNothing) {
  const auto cpu = make_cpu_backend<double>();
  int calls = 0;
  std::string why;
  EXPECT_EQ(cpu->record([&] { ++calls; }, why), nullptr);
  EXPECT_EQ(calls, 0);
  EXPECT_NE(why.find(cpu->name()), std::string::npos) << why;
  EXPECT_NE(why.find("nothing to record"), std::string::npos) << why;
}

// The CPU queue that records as a CUDA stream capture (support/recording_backend.h), on which CI
// checks the logic of CUDA graphs: a recording runs nothing; a replay runs the recorded calls
// with the host scalars they were given then and the buffers' contents of now; a host read or an
// allocation fails the recording, with nothing run; a moved workspace makes it stale.
TEST(DeviceQueueRecord, TheRecordingCpuKeepsHostScalarsAndReadsBuffersAtReplay) {
  testing::RecordingCpuBackend<double> b;
  EXPECT_EQ(b.why_not_recordable(), "");
  EXPECT_EQ(make_cpu_backend<double>()->why_not_recordable(), "the CPU runs work as it is queued");
  const std::vector<double> first{1, 2, 3}, second{10, 20, 30}, zeros(3, 0.0);
  DeviceBuffer<double> x = b.allocate(3), y = b.allocate(3);
  b.copy_from_host(first.data(), x.data(), 3);
  b.copy_from_host(zeros.data(), y.data(), 3);
  const auto read = [&] {
    std::vector<double> out(3);
    b.copy_to_host(y.data(), out.data(), 3);
    return out;
  };
  double alpha = 2;
  std::string why;
  const auto recording = b.record([&] { b.axpy(3, alpha, x.data(), y.data()); }, why);
  ASSERT_NE(recording, nullptr) << why;
  EXPECT_EQ(read(), zeros) << "recording runs nothing";
  alpha = 5;  // the recorded call keeps 2
  recording->replay();
  EXPECT_EQ(read(), (std::vector<double>{2, 4, 6}));
  b.copy_from_host(second.data(), x.data(), 3);
  recording->replay();
  EXPECT_EQ(read(), (std::vector<double>{22, 44, 66})) << "x's contents of the replay's time";

  EXPECT_EQ(b.record(
                [&] {
                  b.axpy(3, 1.0, x.data(), y.data());
                  (void)b.dot(3, x.data(), y.data());
                },
                why),
            nullptr);
  EXPECT_NE(why.find("dot cannot run under stream capture"), std::string::npos) << why;
  EXPECT_EQ(read(), (std::vector<double>{22, 44, 66})) << "a refused recording runs nothing";
  EXPECT_EQ(b.record([&] { (void)b.allocate(4); }, why), nullptr);
  EXPECT_NE(why.find("an allocation cannot run under stream capture"), std::string::npos) << why;

  EXPECT_TRUE(recording->valid());
  b.move_workspace();
  EXPECT_FALSE(recording->valid());
  EXPECT_THROW(recording->replay(), Error);
  EXPECT_EQ(read(), (std::vector<double>{22, 44, 66}));
  EXPECT_EQ(b.recordings(), 1);
  EXPECT_EQ(b.replays(), 2);
}

}  // namespace
}  // namespace lmtrain
