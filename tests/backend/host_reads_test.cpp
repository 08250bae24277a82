// DeviceQueue::host_reads on the CPU backend: every call that returns device data to the host
// counts one read, whatever it returns, and the calls that only queue work count none — the
// contract that lets CI check a GPU's synchronizations on a machine without one.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/rng.h"

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

}  // namespace
}  // namespace lmtrain
