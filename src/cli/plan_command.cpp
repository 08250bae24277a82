// `lmtrain info --plan RUN.toml --ranks R`: the linear solver and the memory plan a fit of the run
// would get on each of R ranks, without training (and before a cluster job is queued).  The plan
// is the library's (Trainer::plan, the same planner fit() uses) for this machine's device and
// budget: run it where the job will run, or set solver.memory_budget_bytes to the ranks' budget.
#include <fmt/format.h>

#include "commands.h"
#include "data_loading.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/block_cyclic.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/solve/memory_plan.h"
#include "run_config.h"

namespace lmtrain::cli {
namespace {

template <typename T>
int print_plan(const RunConfig& config, const PlanArgs& args) {
  const std::size_t expected_inputs =
      config.model.input_shape ? config.model.input_shape->size() : 0;
  const PreparedData data = prepare_data(config, expected_inputs);
  const ModelSpec spec = config.model_spec(data.train.inputs.cols);
  spec.validate();
  const DeviceChoice device = choose_device(config.device, 0);
  auto backend = make_backend<T>(device);
  const Trainer<T> trainer(spec, config.loss, config.solver, config.trainer, *backend);
  const std::size_t samples = data.train.inputs.rows;
  const std::size_t batch =
      config.trainer.batch_size == 0 ? samples : std::min(config.trainer.batch_size, samples);
  fmt::print("Plan of {} on {} rank(s) of {} (nothing is trained)\n\n", config.config_path,
             args.ranks, backend->name());
  fmt::print("{:<26}{}\n", "Model", spec.describe());
  fmt::print("{:<26}{} samples per batch, {} training samples; batch shares: {}\n", "Batch", batch,
             samples, to_string(config.trainer.balance));
  StepPlan plan;
  try {
    plan = trainer.plan(samples, args.ranks);
  } catch (const MemoryPlanError& e) {
    fmt::print("{:<26}{}\n", "Refused", in_config_terms(e.what()));
    return 2;
  }
  fmt::print("{:<26}{} → {}\n", "Linear solver", to_string(config.solver.linear_solver),
             to_string(plan.solver()));
  fmt::print("{:<26}{}\n", "  because", in_config_terms(plan.solver_reason));
  if (!plan.distribution.empty())
    fmt::print("{:<26}{}\n", "Distributed A", in_config_terms(plan.distribution));
  fmt::print("{:<26}{}\n", "Memory plan (each rank)", in_config_terms(plan.memory.describe()));
  fmt::print("{:<26}{}\n", "Geodesic acceleration", plan.geodesic() ? "on" : "off");
  return 0;
}

}  // namespace

int run_plan(const PlanArgs& args) {
  if (args.ranks < 1)
    throw InvalidArgument(fmt::format("lmtrain info --ranks {}: expected ≥ 1 ranks", args.ranks));
  const RunConfig config = load_run_config(args.config, args.overrides);
  return resolve_precision(config.precision).float64_model ? print_plan<double>(config, args)
                                                           : print_plan<float>(config, args);
}

}  // namespace lmtrain::cli
