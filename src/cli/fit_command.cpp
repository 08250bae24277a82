// `lmtrain fit RUN.toml [--set key=value …] [--resume DIR]`.
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include "commands.h"
#include "data_loading.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/io/atomic_write.h"
#include "lmtrain/io/csv_reader.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/records/checkpoint.h"
#include "lmtrain/records/model_evaluation.h"
#include "lmtrain/records/model_file.h"
#include "lmtrain/records/summary_json.h"
#include "lmtrain/train/summary_text.h"
#include "plots.h"
#include "progress.h"
#include "run_config.h"
#include "stop_signals.h"

namespace lmtrain::cli {
namespace {

namespace fs = std::filesystem;

// One row per LM step.
struct StepRow {
  int epoch;
  std::size_t batch;
  double loss, lambda;
  int attempts;
  double gradient_norm, step_norm, seconds;
};

constexpr const char* kHistoryHeader =
    "epoch,batch,loss,validation_loss,lambda,attempts,gradient_norm,step_norm,seconds\n";

// history.csv rows of `rows` (steps not yet written), appended to `out`; the validation loss sits
// on the last step of its epoch.  Each row is formatted once, so a run's history costs time in
// proportion to its steps, not to steps × epochs.
void append_history_rows(const std::vector<StepRow>& rows, const std::vector<EpochRecord>& epochs,
                         std::string& out) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const StepRow& r = rows[i];
    std::string validation;
    const bool last_of_epoch = i + 1 == rows.size() || rows[i + 1].epoch != r.epoch;
    if (last_of_epoch)
      for (auto e = epochs.rbegin(); e != epochs.rend(); ++e)
        if (e->epoch == r.epoch) {
          if (!std::isnan(e->validation_loss))
            validation = fmt::format("{:.9e}", e->validation_loss);
          break;
        }
    out += fmt::format("{},{},{:.9e},{},{:.6e},{},{:.6e},{:.6e},{:.4f}\n", r.epoch, r.batch, r.loss,
                       validation, r.lambda, r.attempts, r.gradient_norm, r.step_norm, r.seconds);
  }
}

// Rows of an earlier history.csv before the resume position (epoch, batch), verbatim.  The file
// is read by the CSV reader (a damaged one is an error naming its line); none: no earlier rows.
std::vector<std::string> earlier_history(const fs::path& path, int epoch, std::size_t batch) {
  if (!fs::exists(path)) return {};
  io::CsvOptions options;
  options.columns = {io::ColumnRef::by_name("epoch"), io::ColumnRef::by_name("batch")};
  const io::NumericTable keys = io::read_csv(path.string(), options);
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<std::string> kept;
  for (std::size_t r = 0; r < keys.rows; ++r) {
    const auto e = static_cast<int>(keys(r, 0));
    const auto b = static_cast<std::size_t>(keys(r, 1));
    if (e < epoch || (e == epoch && b < batch)) kept.push_back(lines.at(keys.source_lines[r] - 1));
  }
  return kept;
}

std::string epochs_csv(const std::vector<EpochRecord>& epochs) {
  std::string s =
      "epoch,training_loss,validation_loss,lambda,accepted,rejected,invalid,gradient_norm,step_"
      "norm,seconds\n";
  for (const auto& e : epochs)
    s += fmt::format(
        "{},{:.9e},{},{:.6e},{},{},{},{:.6e},{:.6e},{:.4f}\n", e.epoch, e.training_loss,
        std::isnan(e.validation_loss) ? std::string() : fmt::format("{:.9e}", e.validation_loss),
        e.lambda, e.accepted, e.rejected, e.invalid, e.gradient_max_norm, e.step_norm, e.seconds);
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Network outputs for a table's inputs (already normalized), in the targets' original units.
template <typename T>
std::vector<double> predict_original_units(Trainer<T>& trainer, const std::vector<T>& params,
                                           const io::LabeledTable& table,
                                           const PreparedData& data) {
  const Dataset<T> d = to_dataset<T>(table);
  const std::vector<T> out = trainer.predict(params, d.x);
  std::vector<double> values(out.begin(), out.end());
  data.normalization.targets.invert(std::span<double>(values));
  return values;
}

std::vector<double> original_targets(const io::LabeledTable& table, const PreparedData& data) {
  std::vector<double> values = table.targets.values;
  data.normalization.targets.invert(std::span<double>(values));
  return values;
}

// The model the configuration describes for the prepared data; its outputs must match the
// targets.
ModelSpec checked_spec(const RunConfig& config, const PreparedData& data) {
  const ModelSpec spec = config.model_spec(data.train.inputs.cols);
  spec.validate();
  if (spec.outputs() != data.train.targets.cols)
    throw InvalidArgument(fmt::format(
        "{}: the model's last layer has {} outputs but the training data has {} target {} — set "
        "the last dense layer's units to {}",
        config.config_path, spec.outputs(), data.train.targets.cols,
        config.data.task == Task::kClassification ? "classes" : "columns",
        data.train.targets.cols));
  return spec;
}

// The ranks' communicator for this device: GPU ranks sum device buffers with NCCL (bootstrapped
// over the MPI ranks); `nccl` asks for it even with one rank, `host` keeps MPI with the device
// data staged through host memory.
template <typename T>
dist::Communicator* connect_ranks(const RunConfig& config, const FitArgs& args,
                                  Backend<T>& backend) {
  dist::Communicator* comm = args.comm != nullptr ? args.comm->get() : nullptr;
  if (args.comm != nullptr && backend.device_kind() == DeviceKind::kCuda &&
      (config.communicator == CommunicatorChoice::kNccl ||
       (config.communicator == CommunicatorChoice::kAuto && comm != nullptr && comm->size() > 1 &&
        dist::nccl_built()))) {
    if (*args.comm == nullptr) *args.comm = dist::make_local_communicator();
    *args.comm = dist::make_nccl_communicator(std::move(*args.comm), backend.device_index());
    return args.comm->get();
  }
  if (config.communicator == CommunicatorChoice::kNccl)
    throw InvalidArgument(
        fmt::format("{}: communicator = \"nccl\" needs a CUDA device (device = \"{}\" "
                    "runs on the CPU); use communicator = \"auto\"",
                    config.config_path, config.device));
  return comm;
}

// " --set 'key=value' …" as the command line gave them, quoted for a shell.
std::string set_arguments(const std::vector<std::string>& overrides) {
  std::string out;
  for (const std::string& o : overrides) {
    std::string quoted = "'";
    for (const char c : o) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += " --set " + quoted + "'";
  }
  return out;
}

// Where the run's files go; only rank 0 writes and (unless --quiet) prints.
struct RunFiles {
  fs::path dir, checkpoint;
  bool root = true;
  bool quiet = false;
  bool created = false;  // this run made `dir` (a run that fails before training removes it)
  // A new run into an earlier run's directory, whose checkpoint this run has not yet replaced.
  bool stale_checkpoint = false;
};

RunFiles run_files(const RunConfig& config, const FitArgs& args, const dist::Communicator* comm) {
  RunFiles f;
  f.root = comm == nullptr || comm->is_root();
  f.quiet = args.quiet || !f.root;
  f.dir = args.resume_dir.empty() ? config.output_dir : args.resume_dir;
  f.checkpoint = f.dir / "checkpoint.safetensors";
  return f;
}

// Once everything before training has been checked: the directory and the config's copy.
void open_run_directory(RunFiles& f, const RunConfig& config, const FitArgs& args) {
  if (!f.root) return;
  std::error_code ec;
  f.created = !fs::exists(f.dir, ec);
  try {
    fs::create_directories(f.dir);
  } catch (const fs::filesystem_error& e) {
    throw InvalidArgument(
        fmt::format("output_dir {}: cannot create it ({}); give a directory "
                    "that can be created (--set output_dir=…)",
                    f.dir.string(), e.code().message()));
  }
  if (!args.resume_dir.empty()) return;
  // The config as given, and the --set overrides the run was started with (as TOML comments:
  // the file stays the config it was).
  std::string text = read_text(config.config_path);
  if (!args.overrides.empty()) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += "\n# This run was started with these overrides of the values above:\n";
    for (const std::string& o : args.overrides) text += "#   --set " + o + "\n";
  }
  io::write_file_atomically((f.dir / "run.toml").string(), text);
  f.stale_checkpoint = fs::exists(f.checkpoint, ec);
}

// A new run that ends without a checkpoint of its own (checkpoint_every = 0) leaves none of the
// earlier run it replaced: a later --resume would continue that run's state under this one's
// config.  Kept while the new run might still fail, so a failed run loses nothing.
void drop_stale_checkpoint(RunFiles& f) {
  if (!f.stale_checkpoint) return;
  std::error_code ec;
  fs::remove(f.checkpoint, ec);
  f.stale_checkpoint = false;
  if (!f.quiet)
    fmt::print(
        "{}: this run replaced an earlier run there; its checkpoint is removed (lmtrain fit "
        "--resume continues a run instead)\n",
        f.dir.string());
}

// A run that failed before its first checkpoint leaves no directory it made.
void remove_failed_run(const RunFiles& f) {
  std::error_code ec;
  if (f.root && f.created && !fs::exists(f.checkpoint, ec)) fs::remove_all(f.dir, ec);
}

template <typename T>
std::optional<TrainingState<T>> load_resume(const FitArgs& args, const RunFiles& files,
                                            const RunFingerprint& fingerprint, int max_epochs) {
  if (args.resume_dir.empty()) return std::nullopt;
  if (!fs::exists(files.checkpoint))
    throw InvalidArgument(
        fmt::format("--resume {}: no checkpoint.safetensors there; give the "
                    "output directory of an earlier `lmtrain fit`",
                    args.resume_dir));
  TrainingState<T> state = io::read_checkpoint<T>(files.checkpoint.string(), fingerprint);
  if (state.epochs_done > max_epochs)
    throw InvalidArgument(fmt::format(
        "--resume {}: its checkpoint is at epoch {}, beyond trainer.max_epochs = {}: nothing is "
        "left to run; raise trainer.max_epochs (--set trainer.max_epochs={})",
        args.resume_dir, state.epochs_done, max_epochs, state.epochs_done + 1));
  if (!files.quiet)
    fmt::print("resuming {} from epoch {}, batch {}\n", files.dir.string(), state.epochs_done,
               state.batches_done);
  return state;
}

// The step and epoch records of a run: the progress display, history.csv and epochs.csv.  The
// files are rewritten atomically (a kill leaves whole files) before every checkpoint — so a
// resume finds the rows it continues —, at the end, and otherwise at most every
// kRecordSeconds for someone watching them: each write syncs two files to the disk, which cost
// W1 (50 epochs of 20 steps of 0.3 ms) three times its training time when done every epoch.
class RunRecorder {
 public:
  RunRecorder(const RunFiles& files, int max_epochs, std::size_t batches,
              std::vector<EpochRecord> epochs, std::vector<std::string> earlier)
      : files_(files),
        epochs_(std::move(epochs)),
        history_(kHistoryHeader),
        progress_(max_epochs, batches, !files.quiet) {
    for (const auto& line : earlier) history_ += line + "\n";
  }
  void on_step(const IterationSummary& it) {
    steps_.push_back({it.epoch, it.batch, it.batch_loss, it.lambda, it.report.attempts,
                      it.report.gradient_max_norm, it.report.step_norm, it.elapsed_seconds});
    progress_.on_step(it);
  }
  void on_epoch(const EpochRecord& e) {
    epochs_.push_back(e);
    progress_.on_epoch(e);
    if (files_.root) append_history_rows(steps_, epochs_, history_);
    steps_.clear();
    if (seconds_since(written_) >= kRecordSeconds) write();
  }
  // history.csv and epochs.csv as they stand (rank 0 only).
  void write() {
    written_ = Clock::now();
    if (!files_.root) return;
    io::write_file_atomically((files_.dir / "history.csv").string(), history_);
    io::write_file_atomically((files_.dir / "epochs.csv").string(), epochs_csv(epochs_));
  }
  void finish() {
    progress_.finish();
    write();
  }

 private:
  const RunFiles& files_;
  std::vector<StepRow> steps_;  // since the last epoch's write
  std::vector<EpochRecord> epochs_;
  std::string history_;  // history.csv as written so far
  Progress progress_;
  static constexpr double kRecordSeconds = 10.0;
  Clock::time_point written_ = Clock::now();
};

// An interrupted or non-finite run ends here, with its exit code; nullopt otherwise.
// `stop_signal`: the one that interrupted it.
std::optional<int> early_end(const Summary& summary, const RunFiles& files, const RunConfig& config,
                             const FitArgs& args, int stop_signal) {
  if (summary.termination == TerminationReason::kInterrupted) {
    if (files.root)
      fmt::print(stderr,
                 "lmtrain: interrupted by signal {}{}; checkpoint saved in {}. Continue with:\n"
                 "  lmtrain fit {}{} --resume {}\n",
                 stop_signal,
                 stop_signal == SIGPIPE ? " (SIGPIPE: the reader of the output went away)" : "",
                 files.checkpoint.string(), config.config_path, set_arguments(args.overrides),
                 files.dir.string());
    return 128 + stop_signal;
  }
  if (summary.termination == TerminationReason::kNonFiniteObjective) {
    if (files.root) {
      fmt::print(stderr, "lmtrain: training stopped: {}\nThe last good checkpoint, if any, is {}\n",
                 summary.message, files.checkpoint.string());
      io::write_file_atomically((files.dir / "summary.txt").string(),
                                in_config_terms(summary.full_report()));
      io::write_file_atomically((files.dir / "summary.json").string(),
                                io::summary_to_json(summary).dump(2) + "\n");
    }
    return 3;
  }
  return files.root ? std::nullopt : std::optional<int>(0);
}

void write_confusion(const io::Metrics& m, const RunFiles& files) {
  std::string csv;
  for (const auto& row : m.confusion) csv += fmt::format("{}\n", fmt::join(row, ","));
  io::write_file_atomically((files.dir / "confusion.csv").string(), csv);
}

// The held-out figures as summary.json has them ("held_out").
nlohmann::json held_out_json(const char* set, const std::string& description,
                             const io::Metrics& m) {
  nlohmann::json j = m.to_json(description);
  j["set"] = set;
  return j;
}

// Test-set figures in the data's own units (or, for classification without a test set, the
// confusion matrix of the validation or training set): the report's text, provenance and
// summary.json's figures.
template <typename T>
std::string evaluate_held_out(Trainer<T>& trainer, const std::vector<T>& params,
                              const PreparedData& data, const RunConfig& config,
                              const RunFiles& files, nlohmann::json& provenance,
                              nlohmann::json& held_out) {
  const bool classification = config.data.task == Task::kClassification;
  if (data.test) {
    const double test_loss = trainer.evaluate(params, to_dataset<T>(*data.test));
    const io::Metrics m = io::compute_metrics(
        predict_original_units(trainer, params, *data.test, data),
        original_targets(*data.test, data), data.test->targets.cols, classification);
    provenance["test_loss"] = test_loss;
    if (m.classification) {
      provenance["test_accuracy"] = m.accuracy;
      write_confusion(m, files);
    } else {
      provenance["test_mse"] = m.mse;
      provenance["test_r2"] = m.r2;
    }
    held_out = held_out_json("test", data.test->description, m);
    held_out["loss"] = test_loss;
    return fmt::format("\nTest set: {}\n  loss {:.6e}, {}\n{}", data.test->description, test_loss,
                       m.describe(), m.confusion_table());
  }
  if (!classification) return "";
  const io::LabeledTable& table = data.validation ? *data.validation : data.train;
  const io::Metrics m =
      io::compute_metrics(predict_original_units(trainer, params, table, data),
                          original_targets(table, data), table.targets.cols, true);
  write_confusion(m, files);
  held_out = held_out_json(data.validation ? "validation" : "training", table.description, m);
  return fmt::format("\n{} set (no test set given): {}\n  {}\n{}",
                     data.validation ? "Validation" : "Training", table.description, m.describe(),
                     m.confusion_table());
}

// 1-D regression: the curve over the training inputs, for the fit plot.
template <typename T>
void write_fit_curve(Trainer<T>& trainer, const std::vector<T>& params, const PreparedData& data,
                     const RunFiles& files) {
  std::vector<double> x = data.train.inputs.values;
  const std::vector<double> y = original_targets(data.train, data);
  const std::vector<double> prediction = predict_original_units(trainer, params, data.train, data);
  data.normalization.inputs.invert(std::span<double>(x));
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::string csv = "x,y,prediction\n";
  for (std::size_t i : order)
    csv += fmt::format("{:.9g},{:.9g},{:.9g}\n", x[i], y[i], prediction[i]);
  io::write_file_atomically((files.dir / "fit.csv").string(), csv);
}

template <typename T>
void write_model(const std::vector<T>& params, const ModelSpec& spec, const PreparedData& data,
                 const RunConfig& config, const Summary& summary, nlohmann::json provenance,
                 const RunFiles& files) {
  provenance["config"] = fs::path(config.config_path).filename().string();
  const std::size_t classes = config.data.task == Task::kClassification ? data.classes : 0;
  io::ModelFile model =
      io::trained_model_file(spec, params, data.normalization, to_string(config.loss.kind), classes,
                             data.class_names, config.seed, summary, std::move(provenance));
  // The training columns' names (a CSV header's): predict and eval select columns by them.
  if (data.train.inputs.column_names.size() == spec.inputs())
    model.input_names = data.train.inputs.column_names;
  io::write_model_file<T>((files.dir / "model.safetensors").string(), model);
}

template <typename T>
int fit(const RunConfig& config, const FitArgs& args) {
  const std::size_t expected_inputs =
      config.model.input_shape ? config.model.input_shape->size() : 0;
  const PreparedData data = prepare_data(config, expected_inputs);
  const ModelSpec spec = checked_spec(config, data);
  // The device and the communicator first: a bad choice fails before any output exists.  Each
  // rank takes the GPU of its node-local rank unless device = "cuda:N" (backend/device.h).
  dist::Communicator* host = args.comm != nullptr ? args.comm->get() : nullptr;
  const DeviceChoice device =
      choose_device(config.device, host != nullptr ? host->local_rank() : 0);
  auto backend = make_backend<T>(device);
  dist::Communicator* comm = connect_ranks(config, args, *backend);
  RunFiles files = run_files(config, args, comm);

  Trainer<T> trainer(spec, config.loss, config.solver, config.trainer, *backend);
  trainer.set_communicator(comm);
  const Dataset<T> train = to_dataset<T>(data.train);
  std::optional<Dataset<T>> validation;
  if (data.validation) validation = to_dataset<T>(*data.validation);
  const RunFingerprint fingerprint =
      run_fingerprint(io::model_spec_to_json(spec).dump(), config.seed, config.trainer,
                      train.samples, config.precision, std::string(to_string(config.loss.kind)));
  const std::size_t batch = fingerprint.batch_size;
  const std::optional<TrainingState<T>> resume =
      load_resume<T>(args, files, fingerprint, config.trainer.max_epochs);
  open_run_directory(files, config, args);
  RunRecorder recorder(files, config.trainer.max_epochs, (train.samples + batch - 1) / batch,
                       resume ? resume->progress.history : std::vector<EpochRecord>{},
                       resume ? earlier_history(files.dir / "history.csv", resume->epochs_done + 1,
                                                resume->batches_done)
                              : std::vector<std::string>{});
  trainer.add_callback([&](const IterationSummary& it) {
    recorder.on_step(it);
    return CallbackResult::kContinue;
  });
  trainer.set_epoch_callback([&](const EpochRecord& e) { recorder.on_epoch(e); });
  trainer.set_checkpoint_handler(
      [&](const TrainingState<T>& state) {
        recorder.write();  // the rows a resume from this checkpoint keeps
        if (files.root) io::write_checkpoint(files.checkpoint.string(), state, fingerprint);
        files.stale_checkpoint = false;
      },
      config.checkpoint_every);
  std::optional<StopSignals> stop(std::in_place, config.trainer.stop_grace_s,
                                  files.checkpoint.string());
  trainer.set_stop_flag(stop->stop_flag());
  if (IterationCallback slow = slow_step_for_tests()) trainer.add_callback(std::move(slow));
  std::vector<T> params =
      Sequential<T>(spec, *backend).initial_parameters(config.model.init, config.seed);
  Summary summary;
  try {
    summary = trainer.fit(params, train, validation ? &*validation : nullptr,
                          resume ? &*resume : nullptr);
  } catch (const InvalidArgument&) {
    remove_failed_run(files);  // bad input found by the planner or the data's checks
    throw;
  }
  // Which device every rank used (collective: all ranks get here, even when interrupted).
  const std::string this_rank =
      fmt::format("{} on {} ({})", device.label(), dist::host_name(), device.reason);
  summary.rank_devices =
      comm != nullptr ? comm->allgather_strings(this_rank) : std::vector{this_rank};
  summary.name_input_groups(spec, data.train.inputs.column_names);
  rewrite_text(summary, in_config_terms);  // solver.lambda_max, not SolverOptions::lambda_max
  if (files.root)
    for (const std::string& line : summary.options_ignored)
      fmt::print(stderr, "lmtrain: warning: {}\n", line);
  const int stop_signal = stop->signal();
  stop.reset();  // the default dispositions again
  recorder.finish();
  drop_stale_checkpoint(files);
  if (const auto code = early_end(summary, files, config, args, stop_signal)) return *code;

  nlohmann::json provenance = io::make_provenance();
  nlohmann::json held_out_figures;
  const std::string held_out =
      evaluate_held_out(trainer, params, data, config, files, provenance, held_out_figures);
  if (config.data.task == Task::kRegression && spec.inputs() == 1 && spec.outputs() == 1)
    write_fit_curve(trainer, params, data, files);
  write_model(params, spec, data, config, summary, provenance, files);
  const std::string report = in_config_terms(summary.full_report()) + held_out;
  io::write_file_atomically((files.dir / "summary.txt").string(), report);
  nlohmann::json summary_json = io::summary_to_json(summary);
  if (!held_out_figures.is_null()) summary_json["held_out"] = std::move(held_out_figures);
  io::write_file_atomically((files.dir / "summary.json").string(), summary_json.dump(2) + "\n");
  std::string warning;
  const auto pngs = make_plots(files.dir.string(), &warning);
  if (!files.quiet) {
    fmt::print("{}", report);
    std::error_code ec;
    fmt::print(
        "\nOutputs in {}: model.safetensors, summary.txt, summary.json, history.csv, epochs.csv, "
        "run.toml{}{}\n",
        files.dir.string(), fs::exists(files.checkpoint, ec) ? ", checkpoint.safetensors" : "",
        pngs.empty() ? "" : fmt::format(", {} plots", pngs.size()));
  }
  if (!warning.empty()) fmt::print(stderr, "lmtrain: warning: {}\n", warning);
  return 0;
}

}  // namespace

int run_fit(const FitArgs& args) {
  const RunConfig config = load_run_config(args.config, args.overrides);
  // auto and mixed train a float32 model; their solver options ask for an automatic or a float64
  // system.
  return resolve_precision(config.precision).float64_model ? fit<double>(config, args)
                                                           : fit<float>(config, args);
}

}  // namespace lmtrain::cli
