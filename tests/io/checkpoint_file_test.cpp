// Checkpoint files (records/checkpoint.h): every field of a TrainingState survives write → read, in
// both precisions; a changed fingerprint or a damaged field is refused, naming the file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/core/rng.h"
#include "lmtrain/records/checkpoint.h"
#include "safetensors.h"
#include "scratch_dir.h"

namespace lmtrain::io::testing {
namespace {

class CheckpointFile : public ScratchDir {};

template <typename T>
TrainingState<T> random_state(std::uint64_t seed) {
  Rng rng(seed);
  auto count = [&] { return static_cast<int>(rng.uniform(1, 1000)); };
  TrainingState<T> s;
  s.epochs_done = count();
  s.batches_done = static_cast<std::size_t>(count());
  s.epoch_rng = {rng.next_u64(), rng.next_u64(), rng.next_u64(), rng.next_u64()};
  s.stepper.damping = {rng.uniform(1e-6, 1e3), 2.0 * count(), rng.uniform(0, 1e-3)};
  s.stepper.geodesic = {count(), count()};
  s.stepper.weight_decays = {rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0, 1)};
  for (int i = 0; i < 17; ++i) s.params.push_back(static_cast<T>(rng.normal()));
  for (int i = 0; i < 17; ++i) s.best_params.push_back(static_cast<T>(rng.normal()));
  s.validation_failures = count();
  s.partial_epoch.accepted = count();
  s.partial_epoch.training_loss = rng.uniform(0, 1);
  s.partial_epoch.block_losses = {{"pde", rng.uniform(0, 1)}, {"boundary", rng.uniform(0, 1)}};
  TrainingProgress& p = s.progress;
  p.initial_loss = rng.uniform(0, 1);
  p.final_loss = rng.uniform(0, 1);
  p.steps = count();
  p.accepted_steps = count();
  p.rejected_steps = count();
  p.invalid_steps = count();
  p.abandoned_steps = count();
  p.geodesic_applied = count();
  p.geodesic_refused = count();
  p.geodesic_skipped = count();
  p.host_reads = count();
  EpochRecord e;
  e.epoch = count();
  e.training_loss = rng.uniform(0, 1);
  e.lambda = rng.uniform(0, 1);
  p.history = {e, e};
  p.history[1].block_losses = {{"pde", rng.uniform(0, 1)}};
  p.final_block_losses = {{"pde", rng.uniform(0, 1)}, {"boundary", rng.uniform(0, 1)}};
  return s;
}

template <typename T>
void expect_round_trip(const std::string& path) {
  const RunFingerprint fingerprint{"1-10-1 tanh", 7, 50, "float32", "mse"};
  const TrainingState<T> s = random_state<T>(sizeof(T));
  write_checkpoint(path, s, fingerprint);
  const TrainingState<T> r = read_checkpoint<T>(path, fingerprint);
  EXPECT_EQ(r.epochs_done, s.epochs_done);
  EXPECT_EQ(r.batches_done, s.batches_done);
  EXPECT_EQ(r.epoch_rng, s.epoch_rng);
  EXPECT_EQ(r.stepper.damping.lambda, s.stepper.damping.lambda);
  EXPECT_EQ(r.stepper.damping.nu, s.stepper.damping.nu);
  EXPECT_EQ(r.stepper.damping.floor, s.stepper.damping.floor);
  EXPECT_EQ(r.stepper.geodesic.skip, s.stepper.geodesic.skip);
  EXPECT_EQ(r.stepper.geodesic.backoff, s.stepper.geodesic.backoff);
  EXPECT_EQ(r.stepper.weight_decays, s.stepper.weight_decays);
  EXPECT_EQ(r.params, s.params);
  EXPECT_EQ(r.best_params, s.best_params);
  EXPECT_EQ(r.validation_failures, s.validation_failures);
  EXPECT_EQ(r.partial_epoch.accepted, s.partial_epoch.accepted);
  EXPECT_EQ(r.partial_epoch.training_loss, s.partial_epoch.training_loss);
  const TrainingProgress &a = r.progress, &b = s.progress;
  EXPECT_EQ(a.initial_loss, b.initial_loss);
  EXPECT_EQ(a.final_loss, b.final_loss);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.accepted_steps, b.accepted_steps);
  EXPECT_EQ(a.rejected_steps, b.rejected_steps);
  EXPECT_EQ(a.invalid_steps, b.invalid_steps);
  EXPECT_EQ(a.abandoned_steps, b.abandoned_steps);
  EXPECT_EQ(a.geodesic_applied, b.geodesic_applied);
  EXPECT_EQ(a.geodesic_refused, b.geodesic_refused);
  EXPECT_EQ(a.geodesic_skipped, b.geodesic_skipped);
  EXPECT_EQ(a.host_reads, b.host_reads);
  ASSERT_EQ(a.history.size(), b.history.size());
  EXPECT_EQ(a.history[1].epoch, b.history[1].epoch);
  EXPECT_EQ(a.history[1].training_loss, b.history[1].training_loss);
  EXPECT_EQ(a.history[1].lambda, b.history[1].lambda);
  EXPECT_EQ(a.history[1].block_losses, b.history[1].block_losses);
  EXPECT_EQ(r.partial_epoch.block_losses, s.partial_epoch.block_losses);
  EXPECT_EQ(a.final_block_losses, b.final_block_losses);
  EXPECT_FALSE(a.final_block_losses.empty());
  try {
    read_checkpoint<T>(path, RunFingerprint{"1-10-1 tanh", 8, 50, "float32", "mse"});
    ADD_FAILURE() << "a changed seed was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointFile, EveryFieldSurvivesWriteThenReadInBothPrecisions) {
  expect_round_trip<float>(path("float.safetensors"));
  expect_round_trip<double>(path("double.safetensors"));
}

TEST_F(CheckpointFile, NegativeBackoffCountsAreADamagedFileNamedInTheError) {
  // A negative skip would never count down to the next correction: refused, naming the file.
  const RunFingerprint fingerprint{"", 1, 0, "", ""};
  TrainingState<double> s = random_state<double>(3);
  s.stepper.geodesic = {-2, 1};
  const std::string p = path("damaged.safetensors");
  write_checkpoint(p, s, fingerprint);
  try {
    read_checkpoint<double>(p, fingerprint);
    ADD_FAILURE() << "a negative skip was accepted";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(p), std::string::npos) << what;
    EXPECT_NE(what.find("geodesic_backoff"), std::string::npos) << what;
  }
}

TEST_F(CheckpointFile, ItsPositionIsReadWithoutARunToCheckItAgainst) {
  // read_checkpoint_position (a front end's look before the library resumes): the epochs done
  // and the parameters, exactly, in both precisions, whatever run made it; a file that is not
  // a checkpoint is refused naming it.
  for (const bool single : {true, false}) {
    const std::string p = path(single ? "f.safetensors" : "d.safetensors");
    const TrainingState<float> f = random_state<float>(11);
    const TrainingState<double> d = random_state<double>(12);
    const RunFingerprint fingerprint{"1-10-1 tanh", 99, 50, single ? "float32" : "float64", "mse"};
    if (single)
      write_checkpoint(p, f, fingerprint);
    else
      write_checkpoint(p, d, fingerprint);
    const CheckpointPosition position = read_checkpoint_position(p);
    EXPECT_EQ(position.epochs_done, single ? f.epochs_done : d.epochs_done);
    const std::vector<double> expected =
        single ? std::vector<double>(f.params.begin(), f.params.end()) : d.params;
    EXPECT_EQ(position.params, expected);
  }
  detail::SafetensorsFile other;  // a model file: tensors, no checkpoint metadata
  other.tensors.push_back(
      detail::SafetensorsTensor::from_values<double>("params", {2}, std::vector<double>{1.0, 2.0}));
  const std::string model = path("model.safetensors");
  detail::write_safetensors(model, other);
  for (const std::string& bad : {model, path("missing.safetensors")}) {
    try {
      read_checkpoint_position(bad);
      ADD_FAILURE() << bad << " was read as a checkpoint";
    } catch (const Error& e) {  // InvalidArgument; a missing file is an I/O error
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST_F(CheckpointFile, KillDuringAWriteLeavesTheLastWholeCheckpointLoadable) {
  // What `lmtrain fit` relies on when a second signal or the grace period ends it at once
  // (_exit, as abrupt as SIGKILL): a child process rewrites an 8 MB checkpoint in a loop, write k
  // with every parameter equal to k, and is killed at 20 moments spread over its writes: after
  // its 1st, 2nd or 3rd whole write is on disk (seen by the parent, so that a slow machine or a
  // sanitizer build does not make every kill land before the first), plus 0–19 ms.  Wherever
  // the kill lands (the temporary file half written, its fsync, the rename), the file loads and
  // is one whole write.
  const RunFingerprint fingerprint{"", 5, 0, "", ""};
  const std::string p = path("checkpoint.safetensors");
  TrainingState<float> s = random_state<float>(5);
  s.params.assign(2'000'000, 0.0f);
  s.epochs_done = 0;
  write_checkpoint(p, s, fingerprint);
  std::vector<int> seen;
  for (int trial = 0; trial < 20; ++trial) {
    s.epochs_done = 0;
    std::fill(s.params.begin(), s.params.end(), 0.0f);
    write_checkpoint(p, s, fingerprint);  // the previous child's writes do not count
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int k = 1;; ++k) {
        std::fill(s.params.begin(), s.params.end(), static_cast<float>(k));
        s.epochs_done = k;
        write_checkpoint(p, s, fingerprint);
      }
    }
    const int writes = 1 + trial % 3;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (read_checkpoint<float>(p, fingerprint).epochs_done < writes &&
           std::chrono::steady_clock::now() < deadline)
      ::usleep(1000);
    ::usleep(static_cast<useconds_t>(1000 * trial));  // and 0 to 19 ms more
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    const TrainingState<float> r = read_checkpoint<float>(p, fingerprint);
    ASSERT_EQ(r.params.size(), s.params.size());
    const float k = r.params.front();
    EXPECT_EQ(std::count(r.params.begin(), r.params.end(), k),
              static_cast<std::ptrdiff_t>(r.params.size()))
        << "trial " << trial << ": a checkpoint mixing two writes";
    EXPECT_EQ(static_cast<float>(r.epochs_done), k);
    seen.push_back(r.epochs_done);
  }
  // The kills landed after several writes (so some during one), not all before the first.
  EXPECT_GE(*std::min_element(seen.begin(), seen.end()), 1);
  EXPECT_GE(*std::max_element(seen.begin(), seen.end()), 3);
}

}  // namespace
}  // namespace lmtrain::io::testing
