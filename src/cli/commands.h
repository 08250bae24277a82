// The subcommands of the `lmtrain` tool.  Each returns the process exit code:
//   0 success, 2 bad input (config, data, model file), 3 training failed (non-finite loss),
//   130 / 143 interrupted by SIGINT / SIGTERM (after a checkpoint, or at once on a second signal
//   or after trainer.stop_grace_s: src/cli/stop_signals.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lmtrain/dist/communicator.h"

namespace lmtrain::cli {

struct FitArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume_dir;
  bool quiet = false;
  // The ranks of an mpirun/srun launch (DESIGN.md §6); only rank 0 prints and writes files.
  // Owned by main (so that its error handler can abort every rank); fit may replace it with an
  // NCCL communicator over the same ranks once the device is known.
  std::unique_ptr<dist::Communicator>* comm = nullptr;
};
int run_fit(const FitArgs& args);

struct PredictArgs {
  std::string model;
  std::string data;
  std::string out;
  std::vector<std::string> columns;  // csv input columns (names or indices)
};
int run_predict(const PredictArgs& args);

struct EvalArgs {
  std::string model;
  std::string data;
  std::string targets;               // npy / idx targets file
  std::vector<std::string> columns;  // csv input columns
  std::vector<std::string> target_columns;
  bool json = false;  // one JSON object on stdout, for scripts
};
int run_eval(const EvalArgs& args);

int run_info(const std::string& model);

// lmtrain info --plan RUN.toml --ranks R [--set key=value …]
struct PlanArgs {
  std::string config;
  std::vector<std::string> overrides;
  int ranks = 1;
};
int run_plan(const PlanArgs& args);
int run_devices();
int run_plot(const std::string& run_dir);

}  // namespace lmtrain::cli
