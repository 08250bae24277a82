// The run configuration of `lmtrain fit`: a TOML file (toml++), every key checked against the
// schema below, with `--set key=value` overrides applied before checking.  Errors name the file,
// the line, the key, what was expected, and suggest the closest valid key for a misspelling.
//
//   seed = 0                     # initialization, shuffling and splits
//   precision = "auto"           # auto: float32 model and J, A and the solve in float32 or
//                                # float64 as SystemPrecision::kAuto chooses | float32 |
//                                # mixed (float64 A and solve) | float64
//   device = "cpu"
//   communicator = "auto"        # auto: NCCL between CUDA ranks (when built with it), else MPI |
//                                # nccl (also with one rank) | host (MPI, device data via host)
//   output_dir = "runs/sinc"     # relative to the config file's directory
//
//   [model]
//   inputs = 1                   # or input_shape = [1, 28, 28]; default: from the data
//   init = "torch"               # torch | glorot | he
//   layers = [ { type = "dense", units = 20 }, { type = "tanh" }, { type = "dense", units = 1 } ]
//     # types: dense(units), conv2d(channels, kernel, stride = 1, padding = 0, bias = true),
//     # max_pool2d / avg_pool2d(kernel, stride = kernel), flatten, and every activation by name
//     # (identity, tanh, sigmoid, relu, elu, gelu, softplus, sin)
//
//   [data]
//   task = "regression"          # regression | classification
//   classes = 10                 # classification; default: max label + 1, or the number of names
//                                #   when a CSV's labels are text (sorted names: io/csv_reader.h)
//   validation_fraction = 0.0    # taken from train when [data.validation] is absent
//   test_fraction = 0.0          # taken from train when [data.test] is absent
//   normalize_inputs = "standardize"   # standardize | none
//   normalize_targets = "standardize"  # regression only: standardize | none
//   [data.train]                 # also [data.validation], [data.test]
//   path = "train.csv"           # csv (inputs and targets), fann, npy or idx(.gz) (inputs)
//   targets_path = "..."         # npy / idx: the targets (or class labels) file
//   format = "auto"              # auto (from the extension) | csv | npy | idx | fann
//   inputs = ["x"]               # csv: column names or 0-based indices; default: all but targets
//   targets = ["y"]              # csv: column names or indices; default: the last column
//   delimiter = ","              # csv
//   rows = 6000                  # use only the first rows of the file (0: all)
//   weights = "w"                # csv: the samples' weights (a column name or index; not an
//                                #   input); or weights_path = "w.npy" (any format); train and
//                                #   validation only: a sample of weight w counts w times
//
//   [loss]     type = "mse", output_weights = [...], huber_delta = 1.0
//              # types: mse | cross_entropy (classification's default) | cross_entropy_sqrt |
//              # cross_entropy_sampled | bce | huber | l1 (core/loss_kind.h)
//   [solver]   every field of lmtrain::SolverOptions (solve/solver_options.h), same names,
//              e.g. regularization = "bayesian" (none | l2 | bayesian | ard), weight_decay = 0.0;
//              system_precision is set by the top-level precision
//   [trainer]  every field of lmtrain::TrainerOptions (train/trainer.h), same names, e.g.
//              stop_grace_s = 30.0 (seconds the step under way gets after the first SIGINT/SIGTERM
//              before the process ends at once, exit 130/143; inf: no limit), plus
//              checkpoint_every = 1 (epochs between checkpoints; 0: only on interruption)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/model_spec.h"
#include "lmtrain/solve/solver_options.h"
#include "lmtrain/train/trainer.h"

namespace lmtrain::cli {

enum class CommunicatorChoice { kAuto, kNccl, kHost };
enum class Task { kRegression, kClassification };

struct DataSource {
  std::string key;           // "data.train": for messages
  std::string path;          // absolute, or relative to the working directory
  std::string targets_path;  // npy / idx
  std::string format = "auto";
  std::vector<std::string> inputs;  // csv column names or decimal indices
  std::vector<std::string> targets;
  char delimiter = ',';
  std::size_t rows = 0;      // the first rows only (0: all)
  std::string weights;       // csv: the sample weights' column (name or index); empty: none
  std::string weights_path;  // npy: one sample weight per row; empty: none
};

struct DataConfig {
  Task task = Task::kRegression;
  std::size_t classes = 0;  // 0: from the labels
  double validation_fraction = 0;
  double test_fraction = 0;
  bool standardize_inputs = true;
  bool standardize_targets = true;
  DataSource train;
  std::optional<DataSource> validation;
  std::optional<DataSource> test;
};

struct ModelConfig {
  std::optional<ImageShape> input_shape;  // absent: the data's column count, flat
  std::vector<LayerSpec> layers;
  Init init = Init::kTorch;
};

struct RunConfig {
  std::string config_path;
  std::uint64_t seed = 0;
  Precision precision = Precision::kAuto;
  std::string device = "cpu";
  CommunicatorChoice communicator = CommunicatorChoice::kAuto;
  std::string output_dir;
  ModelConfig model;
  DataConfig data;
  LossOptions loss;
  SolverOptions solver;
  TrainerOptions trainer;
  int checkpoint_every = 1;

  // The model for `inputs` features (or the configured input shape).
  ModelSpec model_spec(std::size_t inputs) const;
};

// Reads and checks `path`; each override is "dotted.key=value" with a TOML value (a bare word is
// taken as a string).  Throws lmtrain::InvalidArgument with file, line and key on any error.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same on text in memory; relative paths resolve against `path`'s directory.
RunConfig parse_run_config(std::string_view text, const std::string& path,
                           const std::vector<std::string>& overrides = {});

// A library message in the configuration's terms: the C++ option names it uses
// (SolverOptions::lambda_min, TrainerOptions::max_epochs, LossOptions::huber_delta) become the
// TOML keys a user writes (solver.lambda_min, trainer.max_epochs, loss.huber_delta).
std::string in_config_terms(std::string message);

}  // namespace lmtrain::cli
