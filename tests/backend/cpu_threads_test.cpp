// The CPU backend's thread choice (src/backend/cpu/cpu_threads.h): the tuner's decisions on
// synthetic phase durations whose best arm is known, the bound on what exploring costs, and the
// backend's sums, which must not depend on how many threads a phase runs on.
#include "backend/cpu/cpu_threads.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/loss_kind.h"
#include "lmtrain/core/rng.h"

namespace lmtrain::cpu {
namespace {

// Runs `occurrences` of a phase: `duration(arm, i)` is what occurrence i takes on the arm the tuner
// chose, `work(i)` its BLAS multiply-adds.  Returns the arm of every occurrence.
std::vector<std::size_t> simulate(
    ThreadTuner& tuner, int occurrences, const std::function<double(std::size_t, int)>& duration,
    const std::function<double(int)>& work = [](int) { return 0.0; }) {
  std::vector<std::size_t> arms;
  for (int i = 0; i < occurrences; ++i) {
    const std::size_t arm = tuner.choose();
    tuner.record(arm, work(i), duration(arm, i));
    arms.push_back(arm);
  }
  return arms;
}

std::size_t count(const std::vector<std::size_t>& arms, std::size_t arm, std::size_t from = 0) {
  std::size_t n = 0;
  for (std::size_t i = from; i < arms.size(); ++i) n += arms[i] == arm ? 1 : 0;
  return n;
}

// Deterministic noise of ±10 % (a shared machine's jitter), the same for both arms.
double jitter(int i) {
  return 1.0 + 0.1 * std::sin(12.9898 * i);
}

TEST(ThreadTuner, ContentionPicksOneThreadAndExploringCostsAtMostThreePercent) {
  // Two threads three times slower (a co-tenant holds a core): one thread wins, and the time
  // spent trying two threads again stays within kExploreShare·kExploreCost of the phase's.
  ThreadTuner tuner({2, 1});
  const auto arms = simulate(
      tuner, 2000, [](std::size_t arm, int i) { return (arm == 0 ? 3e-3 : 1e-3) * jitter(i); });
  EXPECT_EQ(tuner.threads(tuner.best()), 1);
  const double total = std::accumulate(arms.begin(), arms.end(), 0.0, [](double s, std::size_t a) {
    return s + (a == 0 ? 3e-3 : 1e-3);
  });
  const double ideal = 1e-3 * static_cast<double>(arms.size());
  EXPECT_LE(total / ideal - 1, 0.035) << count(arms, 0) << " of 2000 on two threads";
  EXPECT_GT(count(arms, 0, 100), 0U) << "two threads are never tried again";
}

TEST(ThreadTuner, QuietMachinePicksAllThreads) {
  ThreadTuner tuner({2, 1});
  const auto arms = simulate(
      tuner, 1000, [](std::size_t arm, int i) { return (arm == 0 ? 0.55e-3 : 1e-3) * jitter(i); });
  EXPECT_EQ(tuner.threads(tuner.best()), 2);
  // One thread is 1.8× slower: tried on about kExploreShare·kExploreCost/0.8 of the occurrences.
  EXPECT_LE(count(arms, 1, 10), 1000 * 0.125 * 0.25 / 0.8 * 1.5);
}

TEST(ThreadTuner, MoreThreadsMustBeClearlyFaster) {
  // Two threads 5 % faster: within kMargin, so one thread (which cannot lose much to contention).
  ThreadTuner tuner({2, 1});
  simulate(tuner, 500, [](std::size_t arm, int) { return arm == 0 ? 0.95e-3 : 1e-3; });
  EXPECT_EQ(tuner.threads(tuner.best()), 1);
  ThreadTuner clearly({2, 1});
  simulate(clearly, 500, [](std::size_t arm, int) { return arm == 0 ? 0.8e-3 : 1e-3; });
  EXPECT_EQ(clearly.threads(clearly.best()), 2);
}

TEST(ThreadTuner, FollowsACoTenantWhoComesAndGoes) {
  // Quiet for 300 occurrences, a co-tenant for the next 600, quiet again: two threads take
  // 0.5 ms quiet and 2 ms shared, one thread 1 ms throughout.
  ThreadTuner tuner({2, 1});
  auto shared = [](int i) { return i >= 300 && i < 900; };
  const auto arms = simulate(tuner, 1500, [&](std::size_t arm, int i) {
    return arm == 1 ? 1e-3 : shared(i) ? 2e-3 : 0.5e-3;
  });
  // Quiet: two threads (one thread, 2× behind, tried on ~3 % of occurrences).
  EXPECT_GE(count(arms, 0, 200) - count(arms, 0, 300), 90U);
  // Within 10 occurrences of the co-tenant's arrival (the median of 5 turns after 3 samples),
  // one thread but for the exploring.
  EXPECT_LE(count(arms, 0, 310) - count(arms, 0, 900), 590 * 0.05);
  // Within 400 of its leaving (two threads, 2× behind, are tried on ~3 % of occurrences; three
  // fast ones turn their median): two threads again.
  EXPECT_GE(count(arms, 0, 1300), 180U) << "not back on two threads after the co-tenant left";
}

TEST(ThreadTuner, ComparesArmsOnTheSameMixOfOccurrences) {
  // Geodesic acceleration's phase alternates a heavy part (forward passes, 2 threads help) and a
  // light one (a solve, 1 thread best).  Expected per occurrence, over the 199 heavy and 200
  // light occurrences counted (the first, heavy, is not): two threads (199·8 + 200·2)/399 ms, one
  // thread (199·14 + 200·1)/399 ms, whichever arm happened to see which part more often.
  ThreadTuner tuner({2, 1});
  simulate(
      tuner, 400,
      [](std::size_t arm, int i) {
        const bool heavy = i % 2 == 0;
        return arm == 0 ? (heavy ? 8e-3 : 2e-3) : (heavy ? 14e-3 : 1e-3);
      },
      [](int i) { return i % 2 == 0 ? 4 * kSerialBlasWork : 0.0; });
  EXPECT_EQ(tuner.threads(tuner.best()), 2);
  EXPECT_NEAR(tuner.expected(0), (199 * 8e-3 + 200 * 2e-3) / 399, 1e-12);
  EXPECT_NEAR(tuner.expected(1), (199 * 14e-3 + 200 * 1e-3) / 399, 1e-12);
}

TEST(ThreadTuner, AnArmOtherPhasesFoundFarSlowerIsOnlyExplored) {
  // The other phases measured two threads 6× slower (a loaded machine): this phase does not
  // spend a warm-up occurrence on them at once, only kExploreShare·kExploreCost/5 of them.
  const std::vector<double> loaded{6.0, 1.0};
  ThreadTuner tuner({2, 1});
  std::vector<std::size_t> arms;
  for (int i = 0; i < 400; ++i) {
    const std::size_t arm = tuner.choose(loaded);
    tuner.record(arm, 0, arm == 0 ? 10e-3 : 1e-3);
    arms.push_back(arm);
  }
  EXPECT_LE(count(arms, 0), 400 * 0.125 * 0.25 / 5 + 3);
  EXPECT_EQ(tuner.threads(tuner.best()), 1);
  // Found faster elsewhere (a quiet machine): tried at once, and kept when faster here too.
  ThreadTuner quiet({2, 1});
  std::vector<std::size_t> quiet_arms;
  for (int i = 0; i < 50; ++i) {
    const std::size_t arm = quiet.choose({1.0, 1.8});
    quiet.record(arm, 0, arm == 0 ? 0.5e-3 : 1e-3);
    quiet_arms.push_back(arm);
  }
  EXPECT_GE(count(quiet_arms, 0, 10), 35U);
}

TEST(ThreadTuner, KindsOfOccurrenceFollowTheirBlasWork) {
  EXPECT_EQ(ThreadTuner::kind_of(0), 0U);
  EXPECT_EQ(ThreadTuner::kind_of(kSerialBlasWork / 2), 0U);
  EXPECT_EQ(ThreadTuner::kind_of(kSerialBlasWork), 1U);
  EXPECT_EQ(ThreadTuner::kind_of(3 * kSerialBlasWork), 1U);
  EXPECT_EQ(ThreadTuner::kind_of(4 * kSerialBlasWork), 2U);
  EXPECT_EQ(ThreadTuner::kind_of(1e30), ThreadTuner::kKinds - 1);
}

TEST(ThreadTuner, TheFirstOccurrenceRunsOnOneThreadAndIsNotCounted) {
  ThreadTuner tuner({2, 1});
  EXPECT_EQ(tuner.choose(), 1U);
  tuner.record(1, 0, 1.0);  // cold: not counted
  EXPECT_TRUE(std::isnan(tuner.expected(1)));
}

// The backend's sums over many terms: the same bits on one thread and on two, and close to the
// sum in long double.
TEST(CpuThreads, SumsDoNotDependOnTheThreadCount) {
  const int saved = omp_get_max_threads();
  auto backend = make_cpu_backend<float>();
  Rng rng(5);
  const std::size_t n = 1 << 20, batch = 1 << 15, classes = 4;
  std::vector<float> x(n), y(n), z(batch * classes), t(batch * classes);
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  for (auto& v : y) v = static_cast<float>(rng.uniform(-1, 1));
  for (auto& v : z) v = static_cast<float>(rng.uniform(-2, 2));
  for (std::size_t b = 0; b < batch; ++b) t[b * classes + b % classes] = 1;
  long double exact = 0;
  for (std::size_t i = 0; i < n; ++i) exact += static_cast<long double>(x[i]) * y[i];

  LossParams<float> mse, ce;
  ce.kind = LossKind::kCrossEntropy;
  std::vector<double> dots, mses, ces;
  std::vector<std::vector<float>> seeds;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    dots.push_back(backend->dot(n, x.data(), y.data()));
    mses.push_back(backend->loss_objective(mse, batch, classes, z.data(), t.data()));
    std::vector<float> r(batch * classes), s(batch * classes * classes);
    ces.push_back(
        backend->loss_linearize(ce, batch, classes, z.data(), t.data(), r.data(), s.data()));
    seeds.push_back(s);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(dots[0], dots[1]);
  EXPECT_EQ(mses[0], mses[1]);
  EXPECT_EQ(ces[0], ces[1]);
  EXPECT_EQ(seeds[0], seeds[1]);
  EXPECT_NEAR(dots[0], static_cast<double>(exact), 1e-12 * std::sqrt(static_cast<double>(n)));
}

}  // namespace
}  // namespace lmtrain::cpu
