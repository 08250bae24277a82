// The `lmtrain` command-line tool.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <memory>

#include "commands.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/records/model_file.h"
#include "run_config.h"

int main(int argc, char** argv) {
  using namespace lmtrain::cli;
  CLI::App app{"lmtrain: train neural networks with the Levenberg–Marquardt algorithm"};
  app.set_version_flag("--version", std::string(lmtrain::io::lmtrain_version()));
  app.require_subcommand(1);

  FitArgs fit;
  CLI::App* fit_cmd = app.add_subcommand("fit", "Train the model a run configuration describes");
  fit_cmd->add_option("config", fit.config, "Run configuration (TOML)")
      ->required()
      ->check(CLI::ExistingFile);
  fit_cmd
      ->add_option("--set", fit.overrides,
                   "Override a configuration key: --set trainer.max_epochs=100")
      ->take_all();
  fit_cmd->add_option("--resume", fit.resume_dir,
                      "Continue the run whose output directory this is");
  fit_cmd->add_flag("--quiet,-q", fit.quiet, "Print only errors and warnings");

  PredictArgs predict;
  CLI::App* predict_cmd =
      app.add_subcommand("predict", "Write a model's predictions for a data file");
  predict_cmd->add_option("model", predict.model, "model.safetensors")->required();
  predict_cmd->add_option("--data", predict.data, "Inputs: CSV, NPY, IDX(.gz) or FANN")->required();
  predict_cmd->add_option("--out", predict.out, "Predictions: .csv or .npy (written atomically)")
      ->required();
  predict_cmd
      ->add_option("--columns", predict.columns, "CSV input columns (names or 0-based indices)")
      ->delimiter(',');

  EvalArgs eval;
  CLI::App* eval_cmd =
      app.add_subcommand("eval", "Loss and accuracy / MSE and R² of a model on labelled data");
  eval_cmd->add_option("model", eval.model, "model.safetensors")->required();
  eval_cmd->add_option("--data", eval.data, "CSV or FANN with targets, or NPY/IDX inputs")
      ->required();
  eval_cmd->add_option("--targets", eval.targets, "NPY/IDX targets (or labels) for --data");
  eval_cmd->add_option("--columns", eval.columns, "CSV input columns")->delimiter(',');
  eval_cmd
      ->add_option("--target-columns", eval.target_columns,
                   "CSV target columns (default: the last)")
      ->delimiter(',');
  eval_cmd->add_flag("--json", eval.json,
                     "Print one JSON object (summary.json's held_out fields, with the loss) "
                     "instead of text");

  std::string info_model;
  bool devices = false;
  CLI::App* info_cmd = app.add_subcommand("info", "Describe a model file, or list devices");
  info_cmd->add_option("model", info_model, "model.safetensors");
  info_cmd->add_flag("--devices", devices, "List the CPU and the visible CUDA devices");
  PlanArgs plan;
  info_cmd->add_option("--plan", plan.config,
                       "Print the linear solver and memory plan RUN.toml would get, without "
                       "training");
  info_cmd->add_option("--ranks", plan.ranks, "Ranks the plan is for (with --plan; default 1)");
  info_cmd->add_option("--set", plan.overrides, "Override a config value (with --plan)");

  std::string run_dir;
  CLI::App* plot_cmd = app.add_subcommand("plot", "Regenerate the PNG plots of a run directory");
  plot_cmd->add_option("run_dir", run_dir, "Output directory of `lmtrain fit`")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A wrong command line is bad input like the rest: exit code 2 (README, "Exit codes"), not
    // CLI11's own numbers.
    fmt::print(stderr, "lmtrain: error: {}\nRun with --help for more information.\n", e.what());
    return 2;
  }

  std::unique_ptr<lmtrain::dist::Communicator> comm;
  try {
    if (*fit_cmd) {
      // mpirun/srun with several ranks: MPI (data-parallel training); otherwise one rank.
      comm = lmtrain::dist::make_communicator_from_environment();
      fit.comm = &comm;
      return run_fit(fit);
    }
    if (*predict_cmd) return run_predict(predict);
    if (*eval_cmd) return run_eval(eval);
    if (*info_cmd) {
      if (devices) return run_devices();
      if (!plan.config.empty()) return run_plan(plan);
      if (info_model.empty()) {
        fmt::print(stderr, "lmtrain info: give a model file, --devices or --plan RUN.toml\n");
        return 2;
      }
      return run_info(info_model);
    }
    if (*plot_cmd) return run_plot(run_dir);
  } catch (const std::exception& e) {
    if (comm && comm->size() > 1)  // never leave the other ranks waiting in a collective
      comm->abort(2, fmt::format("lmtrain: rank {} of {}: error: {}", comm->rank(), comm->size(),
                                 e.what()));
    fmt::print(stderr, "lmtrain: error: {}\n", lmtrain::cli::in_config_terms(e.what()));
    return 2;
  }
  return 0;
}
