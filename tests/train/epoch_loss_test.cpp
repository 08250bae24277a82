// The epoch's training loss without repeated work (issue 36): on a full batch it is the
// accepted trial's F — the forward pass and sums of an evaluation, so a separate evaluation of
// the final parameters gives its bits — and no evaluation runs; on mini-batches the evaluation
// reads its chunks' F back once, adding them in the order the chunk-by-chunk reads did.  Both
// against the MSE recomputed in double from the parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "lmtrain/lmtrain.h"
#include "lmtrain/train/predict.h"
#include "support/sinc_data.h"

namespace lmtrain {
namespace {

constexpr std::size_t kSamples = 500, kHidden = 8;

// The MSE of the 1-kHidden-1 tanh network in double (W1, b1, W2, b2 in the flat order).
double mse(const std::vector<float>& p, const Dataset<float>& d) {
  double sum = 0;
  for (std::size_t i = 0; i < d.samples; ++i) {
    double out = p[3 * kHidden];
    for (std::size_t h = 0; h < kHidden; ++h)
      out += static_cast<double>(p[2 * kHidden + h]) *
             std::tanh(static_cast<double>(p[h]) * d.x[i] + static_cast<double>(p[kHidden + h]));
    const double e = out - static_cast<double>(d.y[i]);
    sum += e * e;
  }
  return sum / static_cast<double>(d.samples);
}

struct Fit {
  std::vector<float> params;
  Summary summary;
  std::vector<double> last_batch_loss;    // per epoch: its last step's batch loss
  std::vector<std::int64_t> reads_after;  // per epoch: reads after its last step, to its end
  std::vector<bool> last_accepted;
};

Fit train(std::size_t batch, Backend<float>& backend) {
  const auto spec = ModelSpec::mlp(1, {kHidden}, 1, Activation::kTanh);
  TrainerOptions options;
  options.max_epochs = 4;
  options.batch_size = batch;
  options.seed = 5;
  Trainer<float> trainer(spec, LossOptions{}, SolverOptions{}, options, backend);
  Fit run;
  std::uint64_t reads_at_step = 0;
  double batch_loss = 0;
  bool accepted = false;
  trainer.add_callback([&](const IterationSummary& it) {
    reads_at_step = backend.host_reads();
    batch_loss = it.batch_loss;
    accepted = it.report.accepted;
    return CallbackResult::kContinue;
  });
  trainer.set_epoch_callback([&](const EpochRecord&) {
    run.reads_after.push_back(static_cast<std::int64_t>(backend.host_reads() - reads_at_step));
    run.last_batch_loss.push_back(batch_loss);
    run.last_accepted.push_back(accepted);
  });
  run.params = Sequential<float>(spec, backend).initial_parameters(Init::kTorch, 5);
  run.summary = trainer.fit(run.params, testing::sinc_on_grid<float>(kSamples, 4.0));
  return run;
}

TEST(EpochLoss, FullBatchIsTheAcceptedTrialsWithTheBitsOfAnEvaluation) {
  auto backend = make_cpu_backend<float>();
  const Fit run = train(0, *backend);
  ASSERT_EQ(run.summary.history.size(), 4u);
  int reused = 0;
  for (std::size_t e = 0; e < run.summary.history.size(); ++e) {
    // A step that was not accepted left θ where F was known: no evaluation either.
    EXPECT_EQ(run.reads_after[e], 0) << "epoch " << e + 1 << " evaluated again";
    if (!run.last_accepted[e]) continue;
    ++reused;
    EXPECT_EQ(run.summary.history[e].training_loss, run.last_batch_loss[e]);
  }
  ASSERT_GT(reused, 0);
  // No epoch evaluation ran (the initial losses are setup).
  EXPECT_EQ(run.summary.times[Phase::kValidation], 0.0);
  const Dataset<float> data = testing::sinc_on_grid<float>(kSamples, 4.0);
  const double evaluated = evaluate(ModelSpec::mlp(1, {kHidden}, 1, Activation::kTanh),
                                    LossOptions{}, run.params, data, *backend);
  EXPECT_EQ(run.summary.final_loss, evaluated);
  EXPECT_EQ(run.summary.history.back().training_loss, evaluated);
  EXPECT_NEAR(evaluated, mse(run.params, data), 1e-6 * evaluated);
  EXPECT_LT(evaluated, run.summary.initial_loss);
}

TEST(EpochLoss, MiniBatchEvaluationReadsOnceWithTheChunkByChunkSum) {
  auto backend = make_cpu_backend<float>();
  constexpr std::size_t kBatch = 100;
  const Fit run = train(kBatch, *backend);
  ASSERT_EQ(run.summary.history.size(), 4u);
  // One read per evaluation, after every epoch that moved θ.
  for (std::size_t e = 0; e < run.summary.history.size(); ++e)
    EXPECT_EQ(run.reads_after[e], run.summary.history[e].accepted > 0 ? 1 : 0) << "epoch " << e + 1;
  EXPECT_GT(run.summary.times[Phase::kValidation], 0.0);  // the device clock's time, collected

  // The evaluation as it was: a forward pass and a read per chunk of the step's shard.
  const auto spec = ModelSpec::mlp(1, {kHidden}, 1, Activation::kTanh);
  const Sequential<float> model(spec, *backend);
  const Loss<float> loss(LossOptions{}, 1, *backend);
  const Dataset<float> data = testing::sinc_on_grid<float>(kSamples, 4.0);
  DeviceBuffer<float> x = backend->allocate(kSamples), y = backend->allocate(kSamples),
                      theta = backend->allocate(run.params.size());
  backend->copy_from_host(data.x.data(), x.data(), kSamples);
  backend->copy_from_host(data.y.data(), y.data(), kSamples);
  backend->copy_from_host(run.params.data(), theta.data(), run.params.size());
  ForwardState<float> state;
  double f = 0;
  for (std::size_t first = 0; first < kSamples; first += kBatch) {
    const float* z = model.forward(theta.data(), x.data() + first, kBatch, state, false);
    f += loss.objective(kBatch, z, y.data() + first);
  }
  EXPECT_EQ(run.summary.final_loss, loss.reported(f, kSamples));
  EXPECT_NEAR(run.summary.final_loss, mse(run.params, data), 1e-6 * run.summary.final_loss);
}

}  // namespace
}  // namespace lmtrain
