// lmtrain._core.train: one Trainer<T>::fit over NumPy data, as `lmtrain fit` runs it — the same
// validation split, standardization, initialization, seed and checkpoint fingerprint.  The
// library trains on a thread of its own, with the GIL released, while the calling thread waits
// and runs Python's signal handlers as soon as a signal arrives (Python's wakeup fd wakes it):
// the first Ctrl-C raises the stop flag, the
// trainer stops after the step under way (writing the checkpoint when one was asked for) and
// KeyboardInterrupt reaches the caller.  A second Ctrl-C, or the step still running
// TrainerOptions::stop_grace_s after the first, raises KeyboardInterrupt at once: the run is
// abandoned — it finishes its step in the background, touching no Python object and writing no
// file, and the interpreter waits for it before exiting (lmtrain/_training.py).
#include <fcntl.h>
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "arrays.h"
#include "errors.h"
#include "lmtrain/backend/cpu_threads.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/core/sample_weights.h"
#include "lmtrain/io/row_split.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/records/checkpoint.h"
#include "lmtrain/records/model_file.h"
#include "lmtrain/train/summary_text.h"
#include "module.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

// Everything of a training run but the arrays.
struct TrainingRequest {
  std::string architecture;  // the model file's architecture JSON (io::model_spec_from_json)
  std::size_t classes =
      0;  // classification: the number of classes (y holds indices); 0: regression
  std::vector<std::string> class_names;    // stored in the model file
  std::vector<std::string> feature_names;  // names ard's input groups in the Summary
  SolverOptions solver;
  TrainerOptions trainer;
  LossOptions loss;
  std::string precision = "auto";  // auto | float32 | mixed | float64 (as lmtrain fit's)
  std::string device = "cpu";
  std::string init = "torch";
  std::uint64_t seed = 0;
  bool standardize_inputs = true;
  bool standardize_targets = true;  // regression only
  double validation_fraction = 0;   // without validation arrays: held out of X by io::split_rows
  std::string checkpoint;           // path; empty: none
  int checkpoint_every = 1;
  std::string resume;  // checkpoint path to continue from; empty: a fresh run
  // The starting parameters in the library's flat order; empty: `init` with `seed`.
  std::vector<double> initial_parameters;
};

// The samples' weights of a run (none: every sample weighs 1), for X's rows and for the
// validation rows given apart.
struct TrainingWeights {
  std::optional<HostArray> train, validation;
};

// The arrays of a run as the library's data sets, standardized with statistics of the training
// rows only; what the model file stores as its normalization.
template <typename T>
struct PreparedData {
  Dataset<T> train;
  std::optional<Dataset<T>> validation;
  io::Normalization normalization;
};

// Sample weights as given (a 1-D float64 array, one per row of `rows_of`): checked here, with the
// caller's row numbers, before a split renumbers them.
std::vector<double> sample_weights(const std::optional<HostArray>& w, std::size_t rows,
                                   const char* what) {
  if (!w) return {};
  if (w->dtype() != nb::dtype<double>() || w->ndim() != 1)
    throw nb::type_error(fmt::format("{}: expected a 1-D float64 array", what).c_str());
  if (w->shape(0) != rows)
    throw nb::value_error(fmt::format("{} has {} values for {} rows; give one weight per sample",
                                      what, w->shape(0), rows)
                              .c_str());
  const auto* values = static_cast<const double*>(w->data());
  std::vector<double> out(values, values + rows);
  if (const auto problem = sample_weight_problem(std::span<const double>(out))) {
    if (problem->all_zero)
      throw nb::value_error(
          fmt::format("{}: every weight is 0; at least one sample must weigh more than 0", what)
              .c_str());
    throw nb::value_error(fmt::format("{}[{}] = {}: sample weights must be finite and ≥ 0", what,
                                      problem->index, out[problem->index])
                              .c_str());
  }
  return out;
}

template <typename T>
Dataset<T> make_dataset(const MatrixView& x, const HostArray& y,
                        const std::vector<std::size_t>* rows, const io::Normalization& n,
                        std::size_t classes, const std::vector<double>& weights) {
  Dataset<T> d;
  d.samples = rows != nullptr ? rows->size() : x.rows();
  d.inputs = x.cols();
  d.x = library_values<T>(x, rows, n.inputs);
  if (classes > 0) {
    d.outputs = classes;
    d.y = one_hot_rows<T>(y, classes, rows);
  } else {
    const MatrixView targets(y, "y");
    d.outputs = targets.cols();
    d.y = library_values<T>(targets, rows, n.targets);
  }
  if (!weights.empty()) {
    d.weights.resize(d.samples);
    for (std::size_t i = 0; i < d.samples; ++i)
      d.weights[i] = static_cast<T>(weights[rows != nullptr ? (*rows)[i] : i]);
  }
  return d;
}

void check_rows(const MatrixView& x, const HostArray& y, const char* x_name, const char* y_name) {
  if (y.shape(0) != x.rows())
    throw nb::value_error(fmt::format("{} has {} rows but {} has {}; give one target row per "
                                      "sample",
                                      y_name, y.shape(0), x_name, x.rows())
                              .c_str());
}

template <typename T>
PreparedData<T> prepare(const TrainingRequest& r, const HostArray& x_array, const HostArray& y,
                        const std::optional<HostArray>& x_val,
                        const std::optional<HostArray>& y_val, const TrainingWeights& w) {
  const MatrixView x(x_array, "X");
  check_rows(x, y, "X", "y");
  const std::vector<double> weights = sample_weights(w.train, x.rows(), "sample_weight");
  std::optional<io::RowSplit> split;
  if (!x_val && r.validation_fraction > 0) {
    split = io::split_rows(x.rows(), r.validation_fraction, 0.0, r.seed);
    if (split->validation.empty())
      throw nb::value_error(fmt::format("validation_fraction = {} of {} rows holds out no row; "
                                        "give more rows or a larger validation_fraction",
                                        r.validation_fraction, x.rows())
                                .c_str());
  }
  const std::vector<std::size_t>* train_rows = split ? &split->train : nullptr;
  PreparedData<T> d;
  // With sample weights the statistics are weighted: those of the rows repeated.
  if (r.standardize_inputs) d.normalization.inputs = fit_standardization(x, train_rows, weights);
  if (r.loss.standardizes_targets(r.standardize_targets) && r.classes == 0)
    d.normalization.targets = fit_standardization(MatrixView(y, "y"), train_rows, weights);
  d.train = make_dataset<T>(x, y, train_rows, d.normalization, r.classes, weights);
  if (split) {
    d.validation = make_dataset<T>(x, y, &split->validation, d.normalization, r.classes, weights);
  } else if (x_val) {
    if (!y_val) throw nb::value_error("validation: X given without y");
    const MatrixView xv(*x_val, "validation X");
    check_rows(xv, *y_val, "validation X", "validation y");
    if (xv.cols() != x.cols())
      throw nb::value_error(
          fmt::format("validation X has {} columns but X has {}", xv.cols(), x.cols()).c_str());
    d.validation =
        make_dataset<T>(xv, *y_val, nullptr, d.normalization, r.classes,
                        sample_weights(w.validation, xv.rows(), "validation sample_weight"));
  } else if (w.validation) {
    throw nb::value_error("validation sample_weight given without validation X and y");
  }
  return d;
}

// Runs abandoned by a second Ctrl-C that are still finishing their step: the interpreter waits
// for them before it exits (wait_for_abandoned_runs), so that none is still inside OpenBLAS when
// the process tears down.
struct AbandonedRuns {
  std::mutex mutex;
  std::condition_variable changed;
  int running = 0;
};
AbandonedRuns& abandoned_runs() {
  static AbandonedRuns* runs = new AbandonedRuns;  // never destroyed: used until the very end
  return *runs;
}

// While the main thread waits for a run: the pipe Python's C-level signal handler writes each
// signal's number to (signal.set_wakeup_fd), so the wait ends the moment a signal arrives, and
// the run writes a byte to when it finishes.  The previous wakeup fd (asyncio's, say) comes back
// afterwards.  Only the main thread runs Python's signal handlers, so only it makes one.
class SignalWakeup {
 public:
  SignalWakeup() {
    if (::pipe2(fds_, O_NONBLOCK | O_CLOEXEC) != 0)
      throw Error(fmt::format("cannot wait for training: pipe2: {}", std::strerror(errno)));
    previous_ = nb::cast<int>(set_wakeup_fd()(fds_[1], nb::arg("warn_on_full_buffer") = false));
  }
  SignalWakeup(const SignalWakeup&) = delete;
  SignalWakeup& operator=(const SignalWakeup&) = delete;
  ~SignalWakeup() {
    try {
      set_wakeup_fd()(previous_);
    } catch (nb::python_error&) {
      // An fd the caller had set and closed since: nothing to give back.
    }
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int write_end() const { return fds_[1]; }
  // GIL released: returns after `timeout`, a signal, or the run's byte; empties the pipe.
  void wait(std::chrono::milliseconds timeout) const {
    pollfd p{fds_[0], POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(timeout.count()));
    char drained[64];
    while (::read(fds_[0], drained, sizeof drained) > 0) {
    }
  }

 private:
  static nb::object set_wakeup_fd() { return nb::module_::import_("signal").attr("set_wakeup_fd"); }
  int fds_[2] = {-1, -1};
  int previous_ = -1;
};

// One fit on a thread of its own.  It owns everything the run reads — the data (already copied
// out of NumPy by prepare), the options, the resume state — so the caller may return while it
// runs.  Its only Python object, the epoch callback, is called with the GIL taken and is let go
// by the caller when it abandons the run.
template <typename T>
class TrainingJob {
 public:
  TrainingJob(TrainingRequest r, ModelSpec spec, PreparedData<T> data, RunFingerprint fingerprint,
              std::optional<TrainingState<T>> resume, DeviceChoice device, nb::object on_epoch)
      : r_(std::move(r)),
        spec_(std::move(spec)),
        data_(std::move(data)),
        fingerprint_(std::move(fingerprint)),
        resume_(std::move(resume)),
        device_(std::move(device)),
        on_epoch_(std::move(on_epoch)),
        has_on_epoch_(!on_epoch_.is_none()) {}

  // On the training thread.  The backend is made here, so that a device's per-thread state
  // (CUDA's current device) belongs to the thread that uses it.
  void run() {
    try {
      auto backend = make_backend<T>(device_);
      Trainer<T> trainer(spec_, r_.loss, r_.solver, r_.trainer, *backend);
      trainer.set_stop_flag(&stop_);
      trainer.set_epoch_callback([this](const EpochRecord& e) { after_epoch(e); });
      if (!r_.checkpoint.empty())
        trainer.set_checkpoint_handler(
            [this](const TrainingState<T>& state) { write_checkpoint(state); },
            r_.checkpoint_every);
      params_ = Sequential<T>(spec_, *backend).initial_parameters(parse_init(r_.init), r_.seed);
      if (!r_.initial_parameters.empty()) {
        if (r_.initial_parameters.size() != params_.size())
          throw InvalidArgument(
              fmt::format("initial_parameters has {} values; the network {} has {} parameters",
                          r_.initial_parameters.size(), spec_.describe(), params_.size()));
        params_.assign(r_.initial_parameters.begin(), r_.initial_parameters.end());
      }
      summary_ = trainer.fit(params_, data_.train, data_.validation ? &*data_.validation : nullptr,
                             resume_ ? &*resume_ : nullptr);
    } catch (...) {
      failure_ = std::current_exception();
    }
    const std::lock_guard lock(mutex_);
    finished_ = true;
    finished_changed_.notify_all();
    if (notify_fd_ >= 0) {
      const char byte = 0;
      [[maybe_unused]] const ssize_t n = ::write(notify_fd_, &byte, 1);
    }
    if (abandoned_) {
      AbandonedRuns& runs = abandoned_runs();
      const std::lock_guard runs_lock(runs.mutex);
      --runs.running;
      runs.changed.notify_all();
    }
  }

  // Caller, before starting the run: a descriptor the run writes a byte to when it finishes.
  void notify_on_finish(int fd) { notify_fd_ = fd; }
  // Caller, GIL released: true once the run has finished, waiting at most `timeout` (on
  // `wakeup` when given, which a signal also ends).
  bool wait(const SignalWakeup* wakeup, std::chrono::milliseconds timeout) {
    if (wakeup != nullptr) {
      wakeup->wait(timeout);
      const std::lock_guard lock(mutex_);
      return finished_;
    }
    std::unique_lock lock(mutex_);
    return finished_changed_.wait_for(lock, timeout, [this] { return finished_; });
  }
  // Caller: the stop after the step under way (the first Ctrl-C).
  void ask_stop() { stop_ = true; }
  // Caller, GIL held: lets the run go on alone.  False when it has just finished.
  bool abandon() {
    {
      const std::lock_guard lock(mutex_);
      if (finished_) return false;
      abandoned_ = true;
      notify_fd_ = -1;  // the caller closes it
      stop_ = true;
      AbandonedRuns& runs = abandoned_runs();
      const std::lock_guard runs_lock(runs.mutex);
      ++runs.running;
    }
    on_epoch_ = nb::none();
    epoch_error_.reset();
    return true;
  }
  // Caller, GIL held, after the run finished: the first failure, if any.
  void rethrow() {
    if (epoch_error_) {
      nb::python_error error = std::move(*epoch_error_);
      epoch_error_.reset();
      throw error;
    }
    if (failure_) std::rethrow_exception(failure_);
    if (!checkpoint_failure_.empty()) throw Error(checkpoint_failure_);
  }
  const std::vector<T>& params() const { return params_; }
  Summary& summary() { return summary_; }
  const PreparedData<T>& data() const { return data_; }
  const DeviceChoice& device() const { return device_; }

 private:
  void after_epoch(const EpochRecord& e) {
    if (!has_on_epoch_ || stop_) return;
    nb::gil_scoped_acquire locked;
    if (abandoned_) return;
    try {
      on_epoch_(e.epoch, e.training_loss, e.validation_loss, e.seconds);
    } catch (nb::python_error& error) {
      epoch_error_.emplace(std::move(error));
      stop_ = true;
    }
  }
  // Must not throw (Trainer::CheckpointHandler); an abandoned run writes nothing, so that the
  // file stays the last one the caller knew of.
  void write_checkpoint(const TrainingState<T>& state) {
    if (abandoned_) return;
    try {
      io::write_checkpoint(r_.checkpoint, state, fingerprint_);
    } catch (const std::exception& e) {
      checkpoint_failure_ = e.what();
      stop_ = true;
    }
  }

  TrainingRequest r_;
  ModelSpec spec_;
  PreparedData<T> data_;
  RunFingerprint fingerprint_;
  std::optional<TrainingState<T>> resume_;
  DeviceChoice device_;
  nb::object on_epoch_;
  bool has_on_epoch_;
  std::optional<nb::python_error> epoch_error_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> abandoned_{false};
  std::mutex mutex_;
  std::condition_variable finished_changed_;
  bool finished_ = false;
  int notify_fd_ = -1;
  std::exception_ptr failure_;
  std::string checkpoint_failure_;
  std::vector<T> params_;
  Summary summary_;
};

// The caller's side, GIL held: waits for the run, running Python's signal handlers when a signal
// arrives (with `wakeup`, on the main thread) and at least every 100 ms.  The first exception they
// raise (Ctrl-C's KeyboardInterrupt) asks for a stop after the step and is raised once the run
// has stopped; a second one, or `grace_seconds` passing after the first, is raised at once and
// the run is abandoned.
template <typename T>
void wait_for_training(const std::shared_ptr<TrainingJob<T>>& job, std::thread& worker,
                       const SignalWakeup* wakeup, double grace_seconds) {
  using std::chrono::milliseconds;
  std::optional<nb::python_error> interrupt;
  auto stop_asked = std::chrono::steady_clock::now();
  for (;;) {
    milliseconds timeout(100);
    if (interrupt) {
      const double left = grace_seconds - seconds_since(stop_asked);
      timeout = std::min(timeout, milliseconds(static_cast<long>(std::max(0.0, left) * 1e3) + 1));
    }
    bool finished = false;
    {
      nb::gil_scoped_release unlocked;
      finished = job->wait(wakeup, timeout);
    }
    if (finished) break;
    if (PyErr_CheckSignals() != 0) {
      nb::python_error error;  // fetches (and clears) what the handler raised
      if (!interrupt) {
        interrupt.emplace(std::move(error));
        job->ask_stop();
        stop_asked = std::chrono::steady_clock::now();
      } else if (job->abandon()) {
        worker.detach();
        throw error;
      }  // else the run has just finished: the first interrupt is raised below
    } else if (interrupt && seconds_since(stop_asked) > grace_seconds && job->abandon()) {
      worker.detach();
      nb::python_error error = std::move(*interrupt);
      interrupt.reset();
      throw error;
    }
  }
  worker.join();
  if (interrupt) {
    nb::python_error error = std::move(*interrupt);
    interrupt.reset();
    throw error;
  }
}

// The request's precision, parsed once (SolverOptions' Precision): the model's and the system's.
Precision precision_of(const TrainingRequest& r) {
  if (const std::optional<Precision> p = parse_precision(r.precision)) return *p;
  throw InvalidArgument(fmt::format(
      "precision = \"{}\": expected \"auto\", \"float32\", \"mixed\" or \"float64\"", r.precision));
}

template <typename T>
io::ModelFile trained_model(const TrainingRequest& r, const ModelSpec& spec,
                            const std::vector<T>& params, const io::Normalization& normalization,
                            const Summary& summary) {
  nlohmann::json provenance = io::make_provenance();
  provenance["front_end"] = "python";
  io::ModelFile model =
      io::trained_model_file(spec, params, normalization, to_string(r.loss.kind), r.classes,
                             r.class_names, r.seed, summary, std::move(provenance));
  // X's column names (a DataFrame's, or feature_names): lmtrain predict selects columns by them.
  if (r.feature_names.size() == spec.inputs()) model.input_names = r.feature_names;
  return model;
}

template <typename T>
std::pair<io::ModelFile, Summary> train_as(TrainingRequest r, const HostArray& x,
                                           const HostArray& y,
                                           const std::optional<HostArray>& x_val,
                                           const std::optional<HostArray>& y_val,
                                           nb::object on_epoch, const TrainingWeights& weights) {
  const ModelSpec spec = io::model_spec_from_json(nlohmann::json::parse(r.architecture));
  PreparedData<T> data = prepare<T>(r, x, y, x_val, y_val, weights);
  if (data.train.inputs != spec.inputs() || data.train.outputs != spec.outputs())
    throw InvalidArgument(fmt::format(
        "the network {} takes {} inputs and gives {} outputs, but the data has {} input columns "
        "and {} {}",
        spec.describe(), spec.inputs(), spec.outputs(), data.train.inputs, data.train.outputs,
        r.classes > 0 ? "classes" : "target columns"));
  r.solver.system_precision = resolve_precision(precision_of(r)).system;
  r.trainer.seed = r.seed;
  r.trainer.validate();
  DeviceChoice device = choose_device(r.device, 0);

  // The fingerprint `lmtrain fit` gives its checkpoints: what must not change on resume.
  RunFingerprint fingerprint =
      run_fingerprint(io::model_spec_to_json(spec).dump(), r.seed, r.trainer, data.train.samples,
                      precision_of(r), std::string(to_string(r.loss.kind)));
  std::optional<TrainingState<T>> resume;
  if (!r.resume.empty()) resume = io::read_checkpoint<T>(r.resume, fingerprint);

  const double grace = r.trainer.stop_grace_s;
  auto job =
      std::make_shared<TrainingJob<T>>(r, spec, std::move(data), std::move(fingerprint),
                                       std::move(resume), std::move(device), std::move(on_epoch));
  const bool main_thread = nb::module_::import_("threading")
                               .attr("current_thread")()
                               .is(nb::module_::import_("threading").attr("main_thread")());
  std::optional<SignalWakeup> wakeup;
  if (main_thread) {
    wakeup.emplace();
    job->notify_on_finish(wakeup->write_end());
  }
  std::thread worker([job] { job->run(); });
  wait_for_training(job, worker, wakeup ? &*wakeup : nullptr, grace);
  job->rethrow();
  Summary& summary = job->summary();
  summary.rank_devices = {fmt::format("{} ({})", job->device().label(), job->device().reason)};
  summary.name_input_groups(spec, r.feature_names);
  rewrite_text(summary, in_python_terms);  // lambda_max, not SolverOptions::lambda_max
  return {trained_model(r, spec, job->params(), job->data().normalization, summary),
          std::move(summary)};
}

// The addresses of the X and y buffers the last call of train read, as NumPy handed them over:
// lmtrain._core.last_input_addresses() lets the tests show that C-contiguous float32/float64
// input is read in place, not copied.  Written with the GIL held.
std::pair<std::uintptr_t, std::uintptr_t> last_input_addresses{0, 0};

std::pair<io::ModelFile, Summary> train(const TrainingRequest& r, const HostArray& x,
                                        const HostArray& y, const std::optional<HostArray>& x_val,
                                        const std::optional<HostArray>& y_val, nb::object on_epoch,
                                        const std::optional<HostArray>& sample_weight,
                                        const std::optional<HostArray>& validation_weight) {
  last_input_addresses = {reinterpret_cast<std::uintptr_t>(x.data()),
                          reinterpret_cast<std::uintptr_t>(y.data())};
  const TrainingWeights weights{sample_weight, validation_weight};
  if (resolve_precision(precision_of(r)).float64_model)
    return train_as<double>(r, x, y, x_val, y_val, std::move(on_epoch), weights);
  return train_as<float>(r, x, y, x_val, y_val, std::move(on_epoch), weights);
}

}  // namespace

void bind_training(nb::module_& m) {
  using R = TrainingRequest;
  nb::class_<R>(m, "TrainingRequest", "Everything of a training run but the arrays.")
      .def(nb::init<>())
      .def_rw("architecture", &R::architecture, "The architecture as model files store it (JSON).")
      .def_rw("classes", &R::classes, "Classification: the number of classes; 0: regression.")
      .def_rw("class_names", &R::class_names)
      .def_rw("feature_names", &R::feature_names)
      .def_rw("solver", &R::solver)
      .def_rw("trainer", &R::trainer)
      .def_rw("loss", &R::loss)
      .def_rw("precision", &R::precision, "auto, float32, mixed or float64.")
      .def_rw("device", &R::device, "cpu, cuda, cuda:N or auto.")
      .def_rw("init", &R::init, "torch, glorot or he.")
      .def_rw("seed", &R::seed)
      .def_rw("standardize_inputs", &R::standardize_inputs)
      .def_rw("standardize_targets", &R::standardize_targets)
      .def_rw("validation_fraction", &R::validation_fraction)
      .def_rw("checkpoint", &R::checkpoint)
      .def_rw("checkpoint_every", &R::checkpoint_every)
      .def_rw("resume", &R::resume)
      .def_rw("initial_parameters", &R::initial_parameters,
              "Starting parameters in the library's flat order (empty: init with seed).");
  m.def("train", &train, nb::arg("request"), nb::arg("X"), nb::arg("y"),
        nb::arg("X_validation").none() = nb::none(), nb::arg("y_validation").none() = nb::none(),
        nb::arg("on_epoch").none() = nb::none(), nb::arg("sample_weight").none() = nb::none(),
        nb::arg("validation_sample_weight").none() = nb::none(),
        "Trains the request's network on X (samples × inputs) and y (samples × outputs, float; "
        "classification: int64 class indices) with the GIL released.  Returns the trained "
        "ModelFile and the Summary's fields.  on_epoch(epoch, training_loss, validation_loss, "
        "seconds) is called after every epoch.  sample_weight (float64, one per row of X) and "
        "validation_sample_weight (one per validation row) weigh the samples' losses.");
  m.def(
      "abandoned_runs",
      [] {
        AbandonedRuns& runs = abandoned_runs();
        const std::lock_guard lock(runs.mutex);
        return runs.running;
      },
      "Runs a second Ctrl-C abandoned that are still finishing their LM step.");
  m.def(
      "wait_for_abandoned_runs",
      [](double seconds) {
        AbandonedRuns& runs = abandoned_runs();
        nb::gil_scoped_release unlocked;
        std::unique_lock lock(runs.mutex);
        return runs.changed.wait_for(lock, std::chrono::duration<double>(seconds),
                                     [&runs] { return runs.running == 0; });
      },
      nb::arg("seconds"),
      "Waits at most `seconds` (GIL released) for the abandoned runs to end; True when none "
      "is left.");
  m.def("note_passive_openmp_wait_set_by_lmtrain", &note_passive_openmp_wait_set_by_lmtrain,
        "Tells the Summary that lmtrain set OMP_WAIT_POLICY=passive before loading this module.");
  m.def(
      "checkpoint_position",
      [](const std::string& path) {
        io::CheckpointPosition position = io::read_checkpoint_position(path);
        const std::size_t n = position.params.size();
        return nb::make_tuple(position.epochs_done, numpy_array(std::move(position.params), {n}));
      },
      nb::arg("path"),
      "(epochs done, parameters as float64) of a fit checkpoint, "
      "read without checking it against a run (the resume checks it).  ValueError naming the "
      "file when it is not a checkpoint.");
  m.def(
      "last_input_addresses", [] { return last_input_addresses; },
      "(X, y): the addresses of the buffers the last train call read its X and y from; equal to "
      "the NumPy arrays' own when they were read in place (no copy).");
}

}  // namespace lmtrain::python
