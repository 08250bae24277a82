// summary.json and the pickled lmtrain.Summary: a Summary of a real training run (ard, with
// validation, so every kind of field is filled) survives the trip through JSON with every field —
// the full report, which prints them all, is the same text — and a damaged document is an error
// naming what is wrong.  Residual blocks keep their order and a NaN.
#include "lmtrain/records/summary_json.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lmtrain/core/error.h"
#include "lmtrain/lmtrain.h"

namespace lmtrain::io {
namespace {

Summary trained_summary() {
  auto backend = make_cpu_backend<double>();
  const auto spec = ModelSpec::mlp(2, {5}, 1, Activation::kTanh);
  Dataset<double> train(60, 2, 1), validation(20, 2, 1);
  Rng rng(3);
  for (Dataset<double>* d : {&train, &validation})
    for (std::size_t s = 0; s < d->samples; ++s) {
      d->x[2 * s] = rng.normal();
      d->x[2 * s + 1] = rng.normal();
      d->y[s] = std::sin(d->x[2 * s]) + 0.1 * rng.normal();
    }
  SolverOptions solver;
  solver.regularization = Regularization::kArd;
  TrainerOptions trainer;
  trainer.max_epochs = 4;
  Trainer<double> t(spec, LossOptions{}, solver, trainer, *backend);
  std::vector<double> params =
      Sequential<double>(spec, *backend).initial_parameters(Init::kTorch, 1);
  Summary s = t.fit(params, train, &validation);
  s.rank_devices = {"cpu on test host"};
  return s;
}

TEST(SummaryJson, EveryFieldSurvivesTheRoundTrip) {
  Summary s = trained_summary();
  // The fields precision = "auto" fills, which this float64 run leaves empty (the report prints
  // both: the "because" line and the float32-under-ard warning).
  s.precision_reason = "a float64 system: chosen for the round trip";
  s.float32_system = true;
  // The fields of several ranks (issue 30), which this one-rank run leaves empty: the report
  // prints the shares, the distribution and each rank's peak when they are set.
  s.ranks = 2;
  s.distribution = "1×2 process grid of 2 ranks, 64×64 blocks; chosen for the round trip";
  s.rank_peak_bytes = {123456789, 98765432};
  s.balance = BatchBalance::kMeasured;
  s.batch_shares = {0.375, 0.625};
  // Residual blocks (a physics-informed source's), which the network's source does not declare;
  // NaN (a failed linearization's) travels as null.
  s.final_block_losses = {{"pde", 1.25e-3}, {"initial", 3.5e-7}, {"boundary", std::nan("")}};
  s.history.back().block_losses = s.final_block_losses;
  // The CUDA backend's choice of how to form A (issue 36), which the CPU leaves empty.
  s.normal_matrix = "A = JᵀJ, n = 769, 10000 rows: split-K, chosen for the round trip";
  ASSERT_FALSE(s.penalty_groups.empty());
  ASSERT_FALSE(s.history.empty());
  ASSERT_TRUE(std::isnan(s.history.front().validation_loss) == false);
  const Summary back = summary_from_json(nlohmann::json::parse(summary_to_json(s).dump()));
  EXPECT_EQ(back.full_report(), s.full_report());
  EXPECT_EQ(summary_to_json(back), summary_to_json(s));
  EXPECT_EQ(back.termination, s.termination);
  EXPECT_EQ(back.precision_reason, s.precision_reason);
  EXPECT_TRUE(back.float32_system);
  EXPECT_EQ(back.distribution, s.distribution);
  EXPECT_EQ(back.normal_matrix, s.normal_matrix);
  EXPECT_EQ(back.rank_peak_bytes, s.rank_peak_bytes);
  EXPECT_EQ(back.balance, BatchBalance::kMeasured);
  EXPECT_EQ(back.batch_shares, s.batch_shares);
  EXPECT_EQ(back.linear_solver_used, s.linear_solver_used);
  EXPECT_EQ(back.history.size(), s.history.size());
  EXPECT_DOUBLE_EQ(back.history.back().training_loss, s.history.back().training_loss);
  EXPECT_EQ(back.penalty_groups.size(), s.penalty_groups.size());
  EXPECT_DOUBLE_EQ(back.penalty_groups[1].weight_decay, s.penalty_groups[1].weight_decay);
  for (const auto* blocks : {&back.final_block_losses, &back.history.back().block_losses}) {
    ASSERT_EQ(blocks->size(), 3u);
    EXPECT_EQ((*blocks)[0], s.final_block_losses[0]);  // in the source's order, not sorted
    EXPECT_EQ((*blocks)[1], s.final_block_losses[1]);
    EXPECT_EQ((*blocks)[2].name, "boundary");
    EXPECT_TRUE(std::isnan((*blocks)[2].loss));
  }
  EXPECT_TRUE(back.history.front().block_losses.empty());
  EXPECT_NE(s.full_report().find("  initial                         3.500000e-07\n"),
            std::string::npos)
      << s.full_report();
}

TEST(SummaryJson, ADamagedDocumentNamesWhatIsWrong) {
  nlohmann::json j = summary_to_json(trained_summary());
  const nlohmann::json termination = j["termination"];
  j["termination"] = "tired";
  try {
    summary_from_json(j);
    FAIL() << "an unknown termination was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("termination"), std::string::npos) << e.what();
  }
  j["termination"] = termination;
  j["balance"] = "fastest";
  EXPECT_THROW(summary_from_json(j), InvalidArgument);
  j.erase("balance");  // a summary written before issue 30: equal shares
  EXPECT_EQ(summary_from_json(j).balance, BatchBalance::kEqual);
  // Written before residual blocks (issue 29): none.
  j["progress"].erase("final_block_losses");
  for (auto& e : j["progress"]["history"]) e.erase("block_losses");
  EXPECT_TRUE(summary_from_json(j).final_block_losses.empty());
  j["progress"]["final_block_losses"] = {{{"name", "pde"}}};  // no loss
  EXPECT_THROW(summary_from_json(j), InvalidArgument);
  j["progress"].erase("final_block_losses");
  j.erase("model");
  EXPECT_THROW(summary_from_json(j), InvalidArgument);
}

}  // namespace
}  // namespace lmtrain::io
