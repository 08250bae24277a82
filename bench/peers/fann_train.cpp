// The W6 peer: FANN's own batch training (RPROP by default, or quickprop) of the same network
// lmtrain trains — inputs → hidden tanh → linear outputs — on a FANN train/test split, for a
// wall-clock budget.  Prints JSON lines in the schema of bench/lmtrain_workloads.cpp.
//
// usage: fann_train --train FILE --test FILE [--set NAME] [--hidden 16] [--budget 5]
//                   [--algorithm rprop|quickprop] [--seed 0] [--error-function tanh|linear]
//                   [--standardize-inputs]
//
// --standardize-inputs gives FANN the split lmtrain's W6 rows train on: every input column
// x' = (x − mean)/std with the training file's mean and population standard deviation, applied
// to both files, through lmtrain's own io::Standardization (the definition `lmtrain fit` uses).
// Without it FANN trains on the files as they are (its users' usual setup).  Targets stay in the
// files' units either way, so the losses of both tools are in the same units.
//
// Everything not named here keeps FANN's defaults (weights uniform in [−0.1, 0.1], RPROP's
// Δ₀ = 0.1, η⁺ = 1.2, η⁻ = 0.5, the tanh error function).  FANN's tanh is
// FANN_SIGMOID_SYMMETRIC with steepness s, tanh(s·x); steepness is set to 1 so the hidden layer
// is exactly lmtrain's tanh.  The reported losses are computed here from fann_run as the plain
// mean squared error over samples × outputs (PyTorch's MSELoss), the same figure lmtrain reports.
#include <fann.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../bench_util.h"
#include "lmtrain/io/standardization.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

using bench::peak_rss_bytes;

using bench::median;

std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

struct Evaluation {
  double mse = 0;
  double accuracy = std::nan("");  // one-hot targets only
};

bool one_hot(const fann_train_data* d) {
  if (d->num_output < 2) return false;
  for (unsigned s = 0; s < d->num_data; ++s) {
    int ones = 0;
    for (unsigned o = 0; o < d->num_output; ++o) {
      const fann_type v = d->output[s][o];
      if (v == 1)
        ++ones;
      else if (v != 0)
        return false;
    }
    if (ones != 1) return false;
  }
  return true;
}

Evaluation evaluate(fann* ann, fann_train_data* d) {
  Evaluation e;
  double sum = 0;
  unsigned right = 0;
  const bool classes = one_hot(d);
  for (unsigned s = 0; s < d->num_data; ++s) {
    const fann_type* out = fann_run(ann, d->input[s]);
    for (unsigned o = 0; o < d->num_output; ++o) {
      const double diff = static_cast<double>(out[o]) - static_cast<double>(d->output[s][o]);
      sum += diff * diff;
    }
    if (classes) {
      const auto p = std::max_element(out, out + d->num_output) - out;
      const auto t = std::max_element(d->output[s], d->output[s] + d->num_output) - d->output[s];
      right += p == t ? 1 : 0;
    }
  }
  e.mse = sum / (static_cast<double>(d->num_data) * d->num_output);
  if (classes) e.accuracy = static_cast<double>(right) / d->num_data;
  return e;
}

// Standardizes the inputs of `train` and `test` in place with the statistics of `train`.
void standardize_inputs(fann_train_data* train, fann_train_data* test) {
  const unsigned cols = train->num_input;
  std::vector<fann_type> rows(static_cast<std::size_t>(train->num_data) * cols);
  for (unsigned s = 0; s < train->num_data; ++s)
    std::copy(train->input[s], train->input[s] + cols, rows.begin() + std::size_t{s} * cols);
  const auto stats = lmtrain::io::Standardization::fit(std::span<const fann_type>(rows), cols);
  for (fann_train_data* d : {train, test})
    for (unsigned s = 0; s < d->num_data; ++s) stats.apply(std::span<fann_type>(d->input[s], cols));
}

[[noreturn]] void fail(const std::string& message) {
  std::printf("{\"type\":\"error\",\"tool\":\"fann\",\"error\":%s}\n", quoted(message).c_str());
  std::fprintf(stderr, "fann_train: error: %s\n", message.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string train_path, test_path, set = "?", algorithm = "rprop", error_function = "tanh";
  unsigned hidden = 16;
  double budget = 5.0;
  unsigned seed = 0;
  bool standardize = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--train")
      train_path = value();
    else if (arg == "--test")
      test_path = value();
    else if (arg == "--set")
      set = value();
    else if (arg == "--hidden")
      hidden = static_cast<unsigned>(std::stoul(value()));
    else if (arg == "--budget")
      budget = std::stod(value());
    else if (arg == "--algorithm")
      algorithm = value();
    else if (arg == "--seed")
      seed = static_cast<unsigned>(std::stoul(value()));
    else if (arg == "--error-function")
      error_function = value();
    else if (arg == "--standardize-inputs")
      standardize = true;
    else
      fail("unknown argument '" + arg +
           "'; usage: fann_train --train F --test F [--set NAME] "
           "[--hidden H] [--budget S] [--algorithm rprop|quickprop] [--seed S] "
           "[--error-function tanh|linear] [--standardize-inputs]");
  }
  if (train_path.empty() || test_path.empty()) fail("--train and --test are required");
  if (algorithm != "rprop" && algorithm != "quickprop") fail("--algorithm must be rprop|quickprop");
  const std::string tool = "fann-" + algorithm;

  fann_train_data* train = fann_read_train_from_file(train_path.c_str());
  fann_train_data* test = fann_read_train_from_file(test_path.c_str());
  if (!train || !test) fail("cannot read " + (train ? test_path : train_path));
  if (train->num_input != test->num_input || train->num_output != test->num_output)
    fail(train_path + " and " + test_path + " have different inputs or outputs");
  if (standardize) standardize_inputs(train, test);

  std::srand(seed);  // FANN draws its initial weights with rand()
  fann* ann = fann_create_standard(3, train->num_input, hidden, train->num_output);
  if (!ann) fail("fann_create_standard failed");
  fann_set_activation_function_hidden(ann, FANN_SIGMOID_SYMMETRIC);
  fann_set_activation_steepness_hidden(ann, 1.0);
  fann_set_activation_function_output(ann, FANN_LINEAR);
  fann_set_training_algorithm(ann, algorithm == "rprop" ? FANN_TRAIN_RPROP : FANN_TRAIN_QUICKPROP);
  fann_set_train_error_function(
      ann, error_function == "linear" ? FANN_ERRORFUNC_LINEAR : FANN_ERRORFUNC_TANH);
  const unsigned params = fann_get_total_connections(ann);

  const double initial_loss = evaluate(ann, train).mse;
  std::vector<double> epoch_seconds;
  const Clock::time_point start = Clock::now();
  double elapsed = 0, last_print = -1;
  int epoch = 0;
  float epoch_mse = 0;
  // One epoch of batch RPROP/quickprop is one step over the whole training set.  The budget is
  // checked after every epoch, as lmtrain's Trainer checks max_time_seconds after every step.
  while (elapsed < budget) {
    const Clock::time_point t0 = Clock::now();
    epoch_mse = fann_train_epoch(ann, train);
    const Clock::time_point t1 = Clock::now();
    ++epoch;
    epoch_seconds.push_back(seconds_between(t0, t1));
    elapsed = seconds_between(start, t1);
    // fann_train_epoch's MSE is that of the weights before the epoch's update; thin the curve to
    // one point per 20 ms so the output stays small.
    if (elapsed - last_print >= 0.02 || elapsed >= budget) {
      last_print = elapsed;
      std::printf(
          "{\"type\":\"epoch\",\"tool\":\"%s\",\"workload\":\"W6\",\"variant\":%s,"
          "\"epoch\":%d,\"train_loss\":%s,\"elapsed\":%s}\n",
          tool.c_str(), quoted(set).c_str(), epoch, num(epoch_mse).c_str(), num(elapsed).c_str());
    }
  }
  const double total = seconds_between(start, Clock::now());
  const Evaluation tr = evaluate(ann, train), te = evaluate(ann, test);
  std::string extra;
  if (std::isfinite(te.accuracy))
    extra = ",\"test_accuracy\":" + num(te.accuracy) + ",\"train_accuracy\":" + num(tr.accuracy);
  std::printf(
      "{\"type\":\"result\",\"tool\":\"%s\",\"workload\":\"W6\",\"variant\":%s,\"device\":%s,"
      "\"precision\":\"float32\",\"model\":\"%u-%u-%u tanh/linear\",\"params\":%u,\"batch\":%u,"
      "\"epochs\":%d,\"steps\":%d,\"median_step_s\":%s,\"step_basis\":\"one epoch = one batch "
      "step\",\"median_epoch_s\":%s,\"total_s\":%s,\"initial_train_loss\":%s,"
      "\"final_train_loss\":%s,\"test_loss\":%s%s,\"peak_rss_bytes\":%lld,"
      "\"termination\":\"time_budget\",\"error_function\":%s,\"inputs\":%s}\n",
      tool.c_str(), quoted(set).c_str(), quoted("cpu (FANN 2.2, 1 thread)").c_str(),
      train->num_input, hidden, train->num_output, params, train->num_data, epoch, epoch,
      num(median(epoch_seconds)).c_str(), num(median(epoch_seconds)).c_str(), num(total).c_str(),
      num(initial_loss).c_str(), num(tr.mse).c_str(), num(te.mse).c_str(), extra.c_str(),
      peak_rss_bytes(), quoted(error_function).c_str(),
      quoted(standardize ? "standardized" : "raw").c_str());
  fann_destroy(ann);
  fann_destroy_train(train);
  fann_destroy_train(test);
  return 0;
}
