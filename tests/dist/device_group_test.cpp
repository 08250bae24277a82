// The device group (ranks that are threads of one process): its collectives against the same
// sums, copies and gathers written out serially here; cancellation while ranks wait; and LM steps
// of a 2-7-1 network on 1–3 CPU "devices" of one process against the one-device steps of the
// same batch (the sums of A and g only change order; bounds from the measured spread).
#include "lmtrain/dist/device_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/solve/lm_step.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

// Runs fn(rank, communicator) on `ranks` threads of one group; rethrows the first failure.
void on_threads(int ranks, const std::function<void(int, dist::Communicator&)>& fn) {
  auto group = dist::DeviceGroup::create(ranks);
  std::vector<std::unique_ptr<dist::Communicator>> members;
  for (int r = 0; r < ranks; ++r) members.push_back(group->member(r));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, *members[static_cast<std::size_t>(r)]);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        group->cancel("a rank failed");
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST(DeviceGroup, SumsInRankOrderAndEveryRankGetsTheSameBits) {
  for (const int ranks : {1, 2, 3, 4}) {
    SCOPED_TRACE(ranks);
    constexpr std::size_t n = 1001;  // chunks of unequal length
    std::vector<std::vector<double>> inputs;
    std::vector<std::vector<float>> inputs32;
    Rng rng(static_cast<std::uint64_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      inputs.push_back(random_vector(n, rng, 1e3));
      inputs32.push_back(cast<float>(inputs.back()));
    }
    std::vector<double> expected(n);
    std::vector<float> expected32(n);
    for (std::size_t i = 0; i < n; ++i) {
      double s = inputs[0][i];
      float s32 = inputs32[0][i];
      for (int r = 1; r < ranks; ++r) {
        s += inputs[static_cast<std::size_t>(r)][i];
        s32 += inputs32[static_cast<std::size_t>(r)][i];
      }
      expected[i] = s;
      expected32[i] = s32;
    }
    std::vector<std::vector<double>> got = inputs;
    std::vector<std::vector<float>> got32 = inputs32;
    std::vector<double> scalars(static_cast<std::size_t>(ranks));
    on_threads(ranks, [&](int r, dist::Communicator& c) {
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), ranks);
      for (int repeat = 0; repeat < 50; ++repeat) {  // consecutive collectives reuse the slots
        std::vector<double> mine = inputs[static_cast<std::size_t>(r)];
        c.allreduce_sum(mine.data(), n);
        if (repeat == 49) got[static_cast<std::size_t>(r)] = mine;
      }
      c.allreduce_sum(got32[static_cast<std::size_t>(r)].data(), n);
      scalars[static_cast<std::size_t>(r)] = c.sum(r + 0.5);
    });
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(got[static_cast<std::size_t>(r)], expected);
      EXPECT_EQ(got32[static_cast<std::size_t>(r)], expected32);
      EXPECT_EQ(scalars[static_cast<std::size_t>(r)], ranks * ranks / 2.0);
    }
  }
}

TEST(DeviceGroup, BroadcastsAndGathers) {
  constexpr int ranks = 3;
  std::vector<std::vector<int>> received(ranks), gathered(ranks);
  on_threads(ranks, [&](int r, dist::Communicator& c) {
    std::vector<int> v = {r, 10 * r, 100 * r};
    c.broadcast(v.data(), v.size() * sizeof(int), 2);
    received[static_cast<std::size_t>(r)] = v;
    std::vector<int> all(2 * ranks);
    const int mine[2] = {r, -r};
    c.allgather(mine, sizeof mine, all.data());
    gathered[static_cast<std::size_t>(r)] = all;
    const std::vector<std::string> names = c.allgather_strings(std::string(r + 1, 'x'));
    EXPECT_EQ(names, (std::vector<std::string>{"x", "xx", "xxx"}));
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(received[static_cast<std::size_t>(r)], (std::vector<int>{2, 20, 200}));
    EXPECT_EQ(gathered[static_cast<std::size_t>(r)], (std::vector<int>{0, 0, 1, -1, 2, -2}));
  }
}

// A rank that fails before a collective must not leave the others waiting in it: they throw
// lmtrain::Error naming the reason, and so does every later collective.
TEST(DeviceGroup, ACancelledGroupReleasesTheWaitingRanks) {
  auto group = dist::DeviceGroup::create(3);
  std::vector<std::unique_ptr<dist::Communicator>> members;
  for (int r = 0; r < 3; ++r) members.push_back(group->member(r));
  EXPECT_THROW((void)group->member(1), InvalidArgument);
  std::atomic<int> released{0};
  std::vector<std::thread> waiting;
  for (int r = 0; r < 2; ++r)
    waiting.emplace_back([&, r] {
      double v = 1;
      try {
        members[static_cast<std::size_t>(r)]->allreduce_sum(&v, 1);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 2 ran out of luck"), std::string::npos);
        ++released;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_THROW(members[2]->abort(1, "rank 2 ran out of luck"), Error);
  for (std::thread& t : waiting) t.join();
  EXPECT_EQ(released.load(), 2);
  EXPECT_TRUE(group->cancelled());
  double v = 1;
  EXPECT_THROW(members[0]->allreduce_sum(&v, 1), Error);
}

constexpr std::size_t kBatch = 60, kIn = 2, kHidden = 7;

// θ after `steps` LM steps of the batch split over `ranks` devices of one process (rank r: rows
// [r·B/R, (r+1)·B/R) on a backend of its own), and every rank's final θ.
template <typename T>
std::vector<std::vector<double>> steps_on_devices(int ranks, int steps, const SolverOptions& o,
                                                  const std::vector<double>& x,
                                                  const std::vector<double>& y,
                                                  const std::vector<double>& theta) {
  std::vector<std::vector<double>> result(static_cast<std::size_t>(ranks));
  on_threads(ranks, [&](int r, dist::Communicator& c) {
    const std::size_t lo = kBatch * static_cast<std::size_t>(r) / static_cast<std::size_t>(ranks);
    const std::size_t hi =
        kBatch * static_cast<std::size_t>(r + 1) / static_cast<std::size_t>(ranks);
    const std::vector<double> xs(x.begin() + static_cast<std::ptrdiff_t>(lo * kIn),
                                 x.begin() + static_cast<std::ptrdiff_t>(hi * kIn));
    const std::vector<double> ys(y.begin() + static_cast<std::ptrdiff_t>(lo),
                                 y.begin() + static_cast<std::ptrdiff_t>(hi));
    Problem<T> p(ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh), LossOptions{}, xs, ys,
                 hi - lo);
    p.set_params(theta);
    auto step = make_lm_step<T>(o, LinearSolverType::kCholesky, *p.source, 16, hi - lo,
                                ranks > 1 ? &c : nullptr);
    for (int k = 0; k < steps; ++k) {
      PhaseTimes times;
      (void)step->step(p.params.data(), p.x.data(), p.y.data(), hi - lo, times);
    }
    result[static_cast<std::size_t>(r)] = p.download(p.params.data(), theta.size());
  });
  return result;
}

TEST(DeviceGroup, LmStepsOnSeveralDevicesOfOneProcessEqualOneDevice) {
  Rng rng(41);
  const std::vector<double> x = random_vector(kBatch * kIn, rng);
  std::vector<double> y(kBatch);
  for (std::size_t b = 0; b < kBatch; ++b) y[b] = std::sin(3 * x[b * kIn]) * x[b * kIn + 1];
  const std::vector<double> theta = random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6);
  SolverOptions o;
  o.damping_per_sample = true;  // λ·B with B summed over the devices
  o.lambda_initial = 1e-4;
  const auto one = steps_on_devices<double>(1, 6, o, x, y, theta)[0];
  ASSERT_GT(relative_error(one, theta), 0.1) << "steps that move θ";
  for (const int ranks : {2, 3}) {
    SCOPED_TRACE(ranks);
    const auto several = steps_on_devices<double>(ranks, 6, o, x, y, theta);
    for (const auto& on_rank : several) EXPECT_EQ(on_rank, several[0]) << "every device alike";
    // float64 sums of A and g in another order, through 6 solves: measured 0.8e-12–1.2e-12 (2
    // and 3 devices; OPENBLAS_CORETYPE Haswell, SkylakeX); the targets moved by one ulp move the
    // one-device θ by 2.6e-13–3.9e-13.  The bound is ~80× the largest.
    EXPECT_LE(relative_error(several[0], one), 1e-10);
  }
  // Mixed precision: products of floats are exact in double, but with OpenBLAS's AVX-512 DSYRK
  // (OPENBLAS_CORETYPE=SkylakeX, Cooperlake) the sums' last bits differ and flip a float32
  // rounding of δ now and then.  Measured after 6 steps on 2 devices: 0 with the Haswell and Zen
  // kernels, 7.4e-7 with SkylakeX and Cooperlake — what moving the float32 targets by one ulp
  // does to one device's θ (7.0e-7).  The bound is ~135× that.
  o.system_precision = SystemPrecision::kFloat64;
  const auto mixed_one = steps_on_devices<float>(1, 6, o, x, y, theta)[0];
  const auto mixed_two = steps_on_devices<float>(2, 6, o, x, y, theta);
  EXPECT_EQ(mixed_two[0], mixed_two[1]);
  EXPECT_LE(relative_error(mixed_two[1], mixed_one), 1e-4);
}

}  // namespace
}  // namespace lmtrain::testing
