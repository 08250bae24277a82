// Integration tests of the `lmtrain` binary: fit → predict → eval on generated data, resume after
// kill -9, and every kind of bad input (exit code, message, no output file left behind).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/rng.h"
#include "lmtrain/dist/block_cyclic.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/io/csv_reader.h"
#include "lmtrain/records/model_file.h"
#include "lmtrain/solve/memory_plan.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain::cli {
namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Result run_command(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) r.output += buffer;
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

Result run(const std::string& args) {
  return run_command(std::string(LMTRAIN_CLI_PATH) + " " + args);
}

// The same with one environment assignment ("NAME=value") for the command.
Result run_with_env(const std::string& assignment, const std::string& args) {
  return run_command("env " + assignment + " " + std::string(LMTRAIN_CLI_PATH) + " " + args);
}

class Scratch {
 public:
  Scratch() {
    std::string templ = (fs::temp_directory_path() / "lmtrain-cli-XXXXXX").string();
    dir_ = mkdtemp(templ.data());
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path path(const std::string& name) const { return dir_ / name; }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name).string();
  }
  // Files in the directory (recursively), to check nothing was left behind.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir_))
      if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir_).string());
    return out;
  }

 private:
  fs::path dir_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// y = sin(2x₁) + 0.5·x₂² on random points.
std::string regression_csv(std::size_t rows, std::uint64_t seed) {
  Rng rng(seed);
  std::ostringstream s;
  s << "x1,x2,y\n";
  s.precision(17);
  for (std::size_t i = 0; i < rows; ++i) {
    const double a = rng.uniform(-1.5, 1.5), b = rng.uniform(-1, 1);
    s << a << "," << b << "," << std::sin(2 * a) + 0.5 * b * b << "\n";
  }
  return s.str();
}

std::string regression_config(const std::string& extra_trainer = "", int epochs = 30) {
  return "seed = 3\noutput_dir = \"out\"\n"
         "[model]\nlayers = [{ type = \"dense\", units = 12 }, { type = \"tanh\" }, { type = "
         "\"dense\", units = 1 }]\n"
         "[data]\ntest_fraction = 0.2\n[data.train]\npath = \"data.csv\"\ntargets = [\"y\"]\n"
         "[trainer]\nmax_epochs = " +
         std::to_string(epochs) + "\nbatch_size = 100\n" + extra_trainer;
}

TEST(Cli, VersionAndHelp) {
  const Result v = run("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.output.find(std::string(io::lmtrain_version())), std::string::npos) << v.output;
  for (const char* cmd : {"fit", "predict", "eval", "info", "plot"}) {
    const Result h = run(std::string(cmd) + " --help");
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_NE(h.output.find("Usage"), std::string::npos) << cmd << ": " << h.output;
  }
}

// A wrong command line is bad input: exit code 2 with lmtrain's prefix, as the README says.
TEST(Cli, CommandLineErrorsExitWithTwo) {
  for (const char* args : {"train x.toml", "fit", "predict --data x.csv", "fit x.toml --bogus"}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("lmtrain: error:"), std::string::npos) << args << ": " << r.output;
  }
}

// Misspellings are named where they were made: a layer's key, a --set override's key.
TEST(Cli, MisspelledKeysAreNamedWhereTheyWereWritten) {
  Scratch s;
  s.write("data.csv", regression_csv(50, 5));
  std::string text = regression_config();
  text.replace(text.find("units = 12"), 10, "unit = 12");
  const Result layer = run("fit " + s.write("layer.toml", text) + " --quiet");
  EXPECT_EQ(layer.exit_code, 2) << layer.output;
  EXPECT_NE(layer.output.find("unknown key 'model.layers[0].unit'; did you mean "
                              "'model.layers[0].units'?"),
            std::string::npos)
      << layer.output;
  const Result set = run("fit " + s.write("run.toml", regression_config()) +
                         " --quiet --set trainer.max_epoch=3 --set solver.damping=nielsen");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("--set"), std::string::npos) << set.output;
  EXPECT_EQ(set.output.find("config:"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("did you mean 'trainer.max_epochs'"), std::string::npos) << set.output;
  EXPECT_FALSE(fs::exists(s.path("out")));
}

// An array's element is set in the form the errors name it (model.layers[0].units) or dotted.
// data.train.weights: a CSV column of sample weights (not an input) trains as the file with each
// row repeated that many times — float64, full batch, 6 epochs: the parameters to rounding, the
// final loss a weighted mean; the weighted run is not the unweighted one.  A negative weight is
// refused at its line; data.test takes none; predict reads the weighted file by the model's input
// names, skipping the weights' column.
TEST(Cli, AWeightColumnTrainsAsRepeatedRows) {
  Scratch s;
  Rng rng(3);
  std::ostringstream weighted, repeated, plain, bad;
  for (std::ostringstream* o : {&weighted, &repeated, &plain, &bad}) o->precision(17);
  weighted << "x1,w,x2,y\n";
  bad << "x1,w,x2,y\n";
  repeated << "x1,x2,y\n";
  plain << "x1,x2,y\n";
  for (std::size_t i = 0; i < 60; ++i) {
    const double a = rng.uniform(-1, 1), b = rng.uniform(-2, 2);
    const double y = std::sin(2 * a) + 0.3 * b + 0.05 * rng.normal();
    const int w = static_cast<int>((i * 5 + 1) % 4);
    weighted << a << "," << w << "," << b << "," << y << "\n";
    bad << a << "," << (i == 2 ? -0.5 : w) << "," << b << "," << y << "\n";  // line 4
    plain << a << "," << b << "," << y << "\n";
    for (int copy = 0; copy < w; ++copy) repeated << a << "," << b << "," << y << "\n";
  }
  s.write("weighted.csv", weighted.str());
  s.write("repeated.csv", repeated.str());
  s.write("plain.csv", plain.str());
  const auto config = [&](const std::string& dir, const std::string& data,
                          const std::string& extra) {
    return s.write(dir + ".toml",
                   "seed = 2\nprecision = \"float64\"\noutput_dir = \"" + dir +
                       "\"\n[model]\nlayers = [{ type = \"dense\", units = 5 }, { type = "
                       "\"tanh\" }, { type = \"dense\", units = 1 }]\n[data.train]\npath = \"" +
                       data + "\"\n" + extra + "[trainer]\nmax_epochs = 6\n");
  };
  const auto fit = [&](const std::string& dir, const std::string& data, const std::string& extra) {
    const Result r = run("fit " + config(dir, data, extra) + " --quiet");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return io::read_model_file((s.path(dir) / "model.safetensors").string());
  };
  const io::ModelFile a = fit("a", "weighted.csv", "weights = \"w\"\n");
  const io::ModelFile b = fit("b", "repeated.csv", "");
  const io::ModelFile c = fit("c", "plain.csv", "");
  EXPECT_EQ(a.input_names, (std::vector<std::string>{"x1", "x2"}));
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  double moved = 0;
  for (std::size_t i = 0; i < a.parameters.size(); ++i) {
    // The weighted and the repeated sums in another order: test_sample_weight.py measured
    // ≤ 2.7e-12 (relative) for the same comparison over 4 kernel paths and one ulp.
    EXPECT_NEAR(a.parameters[i], b.parameters[i], 5e-9 * (1 + std::fabs(b.parameters[i]))) << i;
    moved = std::max(moved, std::fabs(a.parameters[i] - c.parameters[i]));
  }
  EXPECT_GT(moved, 1e-3);
  const auto final_loss = [&](const std::string& dir) {
    return nlohmann::json::parse(read_file(s.path(dir) / "summary.json"))
        .at("progress")
        .at("final_loss")
        .get<double>();
  };
  EXPECT_NEAR(final_loss("a"), final_loss("b"), 5e-9 * final_loss("b"));
  // predict takes the model's inputs by name from the weighted file: the repeated model's
  // predictions on the plain file's rows.
  const std::string out_a = s.path("pa.csv").string(), out_b = s.path("pb.csv").string();
  ASSERT_EQ(run("predict " + (s.path("a") / "model.safetensors").string() + " --data " +
                s.path("weighted.csv").string() + " --out " + out_a)
                .exit_code,
            0);
  ASSERT_EQ(run("predict " + (s.path("b") / "model.safetensors").string() + " --data " +
                s.path("plain.csv").string() + " --out " + out_b)
                .exit_code,
            0);
  std::istringstream pa(read_file(out_a)), pb(read_file(out_b));
  std::string la, lb;
  std::size_t rows = 0;
  while (std::getline(pa, la) && std::getline(pb, lb)) {
    if (rows++ == 0) continue;  // the header
    EXPECT_NEAR(std::stod(la), std::stod(lb), 1e-8) << "row " << rows;
  }
  EXPECT_EQ(rows, 61u);

  // A test split of a weighted file is unweighted, as the held-out figures are: its loss (on
  // targets standardized with the weighted statistics) is its unweighted MSE over std².
  const io::ModelFile split =
      fit("split", "weighted.csv", "weights = \"w\"\n[data]\ntest_fraction = 0.25\n");
  const nlohmann::json held_out =
      nlohmann::json::parse(read_file(s.path("split") / "summary.json")).at("held_out");
  const double std_y = split.normalization.targets.scale.at(0);
  EXPECT_NEAR(held_out.at("loss").get<double>(), held_out.at("mse").get<double>() / (std_y * std_y),
              1e-9 * held_out.at("loss").get<double>())
      << held_out.dump();

  // A negative weight: exit 2, its file and line.
  s.write("bad.csv", bad.str());
  const Result refused = run("fit " + config("bad", "bad.csv", "weights = \"w\"\n") + " --quiet");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("bad.csv:4: sample weight -0.5"), std::string::npos)
      << refused.output;
  const Result test_weights =
      run("fit " +
          config("t", "weighted.csv",
                 "weights = \"w\"\n[data.test]\npath = \"weighted.csv\"\nweights = \"w\"\n") +
          " --quiet");
  EXPECT_EQ(test_weights.exit_code, 2);
  EXPECT_NE(test_weights.output.find("data.test takes no sample weights"), std::string::npos)
      << test_weights.output;
}

TEST(Cli, SetReachesALayerByIndexInBracketsOrDotted) {
  Scratch s;
  s.write("data.csv", regression_csv(50, 5));
  const std::string config = s.write("run.toml", regression_config());
  const Result brackets = run("info --plan " + config + " --set model.layers[0].units=7");
  EXPECT_EQ(brackets.exit_code, 0) << brackets.output;
  EXPECT_NE(brackets.output.find("2-7-1"), std::string::npos) << brackets.output;
  const Result dotted = run("info --plan " + config + " --set model.layers.0.units=5");
  EXPECT_NE(dotted.output.find("2-5-1"), std::string::npos) << dotted.output;
  const Result word = run("info --plan " + config + " --set model.layers[first].units=5");
  EXPECT_EQ(word.exit_code, 2) << word.output;
  EXPECT_NE(word.output.find("--set model.layers[first].units=5: '[first]' is not an array index; "
                             "write model.layers[0].units or model.layers.0.units"),
            std::string::npos)
      << word.output;
  const Result past = run("info --plan " + config + " --set model.layers[3].units=5");
  EXPECT_EQ(past.exit_code, 2) << past.output;
  EXPECT_NE(past.output.find("'3' is not an index of the array (0 … 2)"), std::string::npos)
      << past.output;
}

// A run directory holds one run: a new run into it removes the earlier run's checkpoint, records
// its --set overrides in run.toml, and a resume cannot go backwards or start from nothing.
TEST(Cli, RunDirectoryHoldsOneRun) {
  Scratch s;
  s.write("data.csv", regression_csv(200, 4));
  const std::string config = s.write("run.toml", regression_config("", 5));
  ASSERT_EQ(run("fit " + config + " --quiet").exit_code, 0);
  ASSERT_TRUE(fs::exists(s.path("out") / "checkpoint.safetensors"));

  const Result beyond = run("fit " + config + " --quiet --resume " + s.path("out").string() +
                            " --set trainer.max_epochs=2");
  EXPECT_EQ(beyond.exit_code, 2) << beyond.output;
  EXPECT_NE(beyond.output.find("checkpoint is at epoch 5, beyond trainer.max_epochs = 2"),
            std::string::npos)
      << beyond.output;

  const Result again =
      run("fit " + config + " --set trainer.max_epochs=2 --set trainer.checkpoint_every=0");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("this run replaced an earlier run there"), std::string::npos)
      << again.output;
  EXPECT_FALSE(fs::exists(s.path("out") / "checkpoint.safetensors"));
  const std::string copied = read_file(s.path("out") / "run.toml");
  EXPECT_NE(copied.find("#   --set trainer.max_epochs=2\n#   --set trainer.checkpoint_every=0"),
            std::string::npos)
      << copied;

  const Result nowhere = run("fit " + config + " --quiet --resume " + s.path("nowhere").string());
  EXPECT_EQ(nowhere.exit_code, 2) << nowhere.output;
  EXPECT_FALSE(fs::exists(s.path("nowhere"))) << "a failed resume made its directory";
}

TEST(Cli, FitPredictEvalRoundTrip) {
  Scratch s;
  s.write("data.csv", regression_csv(500, 1));
  const std::string config = s.write("run.toml", regression_config());
  const Result fit = run("fit " + config + " --quiet");
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  for (const char* f : {"model.safetensors", "summary.txt", "history.csv", "epochs.csv",
                        "checkpoint.safetensors", "run.toml"})
    EXPECT_TRUE(fs::exists(s.path("out") / f)) << f;

  // predict on the training CSV (its first two columns are the inputs).
  const std::string model = (s.path("out") / "model.safetensors").string();
  const Result predict = run("predict " + model + " --data " + s.path("data.csv").string() +
                             " --out " + s.path("pred.csv").string());
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  const io::NumericTable data = io::read_csv(s.path("data.csv").string());
  const io::NumericTable pred = io::read_csv(s.path("pred.csv").string());
  ASSERT_EQ(pred.rows, data.rows);
  double sse = 0, sst = 0, mean = 0;
  double rounding = 0;  // the most 9 significant digits (|δ| ≤ 5e-9·|p|) can move the SSE
  for (std::size_t r = 0; r < data.rows; ++r) mean += data(r, 2) / static_cast<double>(data.rows);
  for (std::size_t r = 0; r < data.rows; ++r) {
    sse += (pred(r, 0) - data(r, 2)) * (pred(r, 0) - data(r, 2));
    sst += (data(r, 2) - mean) * (data(r, 2) - mean);
    const double delta = 5e-9 * std::abs(pred(r, 0));
    rounding += 2 * std::abs(pred(r, 0) - data(r, 2)) * delta + delta * delta;
  }
  const double mse = sse / static_cast<double>(data.rows);
  EXPECT_LT(mse, 0.01) << "the network should fit this smooth function";

  // eval reports the same MSE as the predictions give (printed with 6 significant digits).
  const Result eval = run("eval " + model + " --data " + s.path("data.csv").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const auto at = eval.output.find("MSE ");
  ASSERT_NE(at, std::string::npos) << eval.output;
  EXPECT_NEAR(std::stod(eval.output.substr(at + 4)), mse, 1e-5 * mse) << eval.output;
  const auto r2 = eval.output.find("R² ");
  ASSERT_NE(r2, std::string::npos);
  EXPECT_NEAR(std::stod(eval.output.substr(r2 + 4)), 1 - sse / sst, 1e-5);
  // --json: the same figures to full precision, within what the predictions' 9 digits allow.
  const Result json = run("eval " + model + " --data " + s.path("data.csv").string() + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json figures = nlohmann::json::parse(json.output);
  const double bound = rounding / static_cast<double>(data.rows) + 1e-14 * mse;
  EXPECT_NEAR(figures.at("mse").get<double>(), mse, bound);
  EXPECT_NEAR(figures.at("r2").get<double>(), 1 - sse / sst, 2 * rounding / sst + 1e-14);
  EXPECT_EQ(figures.at("samples"), 500);
  EXPECT_EQ(figures.at("loss_name"), "mse");
  EXPECT_TRUE(figures.at("loss_on_standardized_targets").get<bool>());
  const auto loss_at = eval.output.find("on standardized targets) ");
  ASSERT_NE(loss_at, std::string::npos) << eval.output;
  EXPECT_NEAR(figures.at("loss").get<double>(), std::stod(eval.output.substr(loss_at + 25)),
              1e-6 * figures.at("loss").get<double>());

  const Result info = run("info " + model);
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_NE(info.output.find("2-12-1 tanh (49 parameters)"), std::string::npos) << info.output;

  // summary.json carries the report's test-set figures too.
  const nlohmann::json summary = nlohmann::json::parse(read_file(s.path("out") / "summary.json"));
  ASSERT_TRUE(summary.contains("held_out")) << summary.dump(2);
  EXPECT_EQ(summary["held_out"]["set"], "test");
  EXPECT_EQ(summary["held_out"]["samples"], 100);
  const std::string report = read_file(s.path("out") / "summary.txt");
  const auto test_mse = report.find("MSE ", report.find("Test set:"));
  ASSERT_NE(test_mse, std::string::npos) << report;
  const double printed = std::stod(report.substr(test_mse + 4));
  EXPECT_NEAR(summary["held_out"]["mse"].get<double>(), printed, 1e-5 * printed);
}

// Class labels as text (an iris.csv): the classes are the sorted distinct names, so the run is
// the run on the same file with each name replaced by its index in that order — bit for bit —
// and the model predicts names, evaluates files that name them and refuses one that does not.
TEST(Cli, TextClassLabelsTrainAsTheirSortedIndicesAndPredictTheirNames) {
  Scratch s;
  const std::vector<std::string> names = {"setosa", "versicolor", "virginica"};  // sorted
  Rng rng(7);
  std::ostringstream text, codes, valid_text, valid_codes;
  for (std::ostringstream* o : {&text, &codes, &valid_text, &valid_codes}) {
    o->precision(17);
    *o << "x1,x2,species\n";
  }
  for (std::size_t i = 0; i < 240; ++i) {
    const double a = rng.uniform(-1, 1), b = rng.uniform(-1, 1);
    const std::size_t k = a + b < -0.4 ? 2 : (a - b > 0.3 ? 0 : 1);  // three regions
    const bool valid = i >= 200 && k != 1;  // the validation file lacks a class
    if (i >= 200 && !valid) continue;
    std::ostringstream& t = valid ? valid_text : text;
    std::ostringstream& c = valid ? valid_codes : codes;
    t << a << "," << b << "," << names[k] << "\n";
    c << a << "," << b << "," << k << "\n";
  }
  const auto fit = [&](const std::string& dir, const std::string& train, const std::string& valid) {
    const std::string config = s.write(
        dir + ".toml", "seed = 5\noutput_dir = \"" + dir +
                           "\"\n[model]\nlayers = [{ type = \"dense\", units = 6 }, { type = "
                           "\"tanh\" }, { type = \"dense\", units = 3 }]\n[data]\ntask = "
                           "\"classification\"\n[data.train]\npath = \"" +
                           train + "\"\n[data.validation]\npath = \"" + valid +
                           "\"\n[trainer]\nmax_epochs = 8\n");
    const Result r = run("fit " + config + " --quiet");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return io::read_model_file((s.path(dir) / "model.safetensors").string());
  };
  s.write("text.csv", text.str());
  s.write("codes.csv", codes.str());
  s.write("valid_text.csv", valid_text.str());
  s.write("valid_codes.csv", valid_codes.str());
  const io::ModelFile named = fit("named", "text.csv", "valid_text.csv");
  const io::ModelFile indexed = fit("indexed", "codes.csv", "valid_codes.csv");
  EXPECT_EQ(named.class_names, names);
  EXPECT_TRUE(indexed.class_names.empty());
  EXPECT_EQ(named.parameters, indexed.parameters);  // the same run, bit for bit
  // predict writes the class's name where the index model writes its index.
  const std::string model = (s.path("named") / "model.safetensors").string();
  const std::string data = " --data " + s.path("text.csv").string();
  ASSERT_EQ(run("predict " + model + data + " --out " + s.path("p.csv").string()).exit_code, 0);
  ASSERT_EQ(run("predict " + (s.path("indexed") / "model.safetensors").string() + data + " --out " +
                s.path("q.csv").string())
                .exit_code,
            0);
  std::istringstream by_name(read_file(s.path("p.csv"))), by_index(read_file(s.path("q.csv")));
  std::string a, b;
  std::size_t rows = 0;
  std::getline(by_name, a);
  std::getline(by_index, b);
  EXPECT_EQ(a, b);  // the header: class,p0,p1,p2
  while (std::getline(by_name, a) && std::getline(by_index, b)) {
    const auto comma = b.find(',');
    ASSERT_NE(comma, std::string::npos);
    EXPECT_EQ(a, names[std::stoul(b.substr(0, comma))] + b.substr(comma)) << "row " << rows;
    ++rows;
  }
  EXPECT_EQ(rows, 200u);
  // eval on the names agrees with eval on the indices; info lists the names.
  const Result eval_named = run("eval " + model + " --data " + s.path("valid_text.csv").string());
  const Result eval_indexed = run("eval " + (s.path("indexed") / "model.safetensors").string() +
                                  " --data " + s.path("valid_codes.csv").string());
  ASSERT_EQ(eval_named.exit_code, 0) << eval_named.output;
  EXPECT_EQ(eval_named.output.substr(eval_named.output.find('\n')),
            eval_indexed.output.substr(eval_indexed.output.find('\n')) +
                "classes: 0 = setosa, 1 = versicolor, 2 = virginica\n");
  EXPECT_NE(run("info " + model).output.find("3 classes (setosa, versicolor, virginica)"),
            std::string::npos);

  const nlohmann::json figures = nlohmann::json::parse(
      run("eval " + model + " --data " + s.path("valid_text.csv").string() + " --json").output);
  EXPECT_EQ(figures.at("classes"), names);
  std::size_t correct = 0, total = 0;
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t p = 0; p < 3; ++p) {
      const std::size_t count = figures.at("confusion").at(t).at(p).get<std::size_t>();
      total += count;
      correct += t == p ? count : 0;
    }
  EXPECT_EQ(total, figures.at("samples").get<std::size_t>());
  EXPECT_EQ(figures.at("accuracy").get<double>(),
            static_cast<double>(correct) / static_cast<double>(total));
  const auto accuracy_at = eval_named.output.find("accuracy ");
  ASSERT_NE(accuracy_at, std::string::npos);
  EXPECT_NEAR(figures.at("accuracy").get<double>(),
              std::stod(eval_named.output.substr(accuracy_at + 9)), 5e-5);
  s.write("daisy.csv", "x1,x2,species\n0.5,0.5,setosa\n0.1,0.2,daisy\n");
  const Result daisy = run("eval " + model + " --data " + s.path("daisy.csv").string());
  EXPECT_EQ(daisy.exit_code, 2);
  EXPECT_NE(daisy.output.find("daisy.csv:3: line 3, field 3 of 3 (column \"species\") is "
                              "\"daisy\", which is not one of the 3 classes trained on (setosa, "
                              "versicolor, virginica)"),
            std::string::npos)
      << daisy.output;
}

// The training columns' names travel in the model file: predict and eval read a CSV whose
// columns are in another order, or have an extra id column first, by name — and refuse a header
// that lacks one, where reading by position would predict from the wrong column without a word.
TEST(Cli, PredictAndEvalSelectTheTrainingColumnsByName) {
  Scratch s;
  s.write("data.csv", regression_csv(300, 2));
  const std::string config = s.write("run.toml", regression_config("", 10));
  ASSERT_EQ(run("fit " + config + " --quiet").exit_code, 0);
  const std::string model = (s.path("out") / "model.safetensors").string();
  EXPECT_EQ(io::read_model_file(model).input_names, (std::vector<std::string>{"x1", "x2"}));

  // data.csv's columns (x1, x2, y = 0, 1, 2) rewritten under `header` in the order `columns`;
  // -1 is an id column.
  const io::NumericTable data = io::read_csv(s.path("data.csv").string());
  const auto rearranged = [&](const std::string& name, const std::string& header,
                              const std::vector<int>& columns) {
    std::ostringstream csv;
    csv.precision(17);
    csv << header << "\n";
    for (std::size_t r = 0; r < data.rows; ++r)
      for (std::size_t i = 0; i < columns.size(); ++i)
        (columns[i] < 0 ? csv << 1000 + r : csv << data(r, static_cast<std::size_t>(columns[i])))
            << (i + 1 < columns.size() ? "," : "\n");
    s.write(name, csv.str());
  };
  rearranged("shuffled.csv", "id,y,x2,x1", {-1, 2, 1, 0});
  const auto predict = [&](const std::string& file, const std::string& out) {
    return run("predict " + model + " --data " + s.path(file).string() + " --out " +
               s.path(out).string());
  };
  ASSERT_EQ(predict("data.csv", "a.csv").exit_code, 0);
  const Result by_name = predict("shuffled.csv", "b.csv");
  ASSERT_EQ(by_name.exit_code, 0) << by_name.output;
  const io::NumericTable a = io::read_csv(s.path("a.csv").string());
  const io::NumericTable b = io::read_csv(s.path("b.csv").string());
  ASSERT_EQ(a.values.size(), data.rows);
  EXPECT_EQ(a.values, b.values);  // the same inputs, bit for bit

  // eval: inputs by name, the target the header's other column (id is one too: refused, named).
  const Result eval_id = run("eval " + model + " --data " + s.path("shuffled.csv").string());
  EXPECT_EQ(eval_id.exit_code, 2) << eval_id.output;
  EXPECT_NE(eval_id.output.find("id, y"), std::string::npos) << eval_id.output;
  EXPECT_NE(eval_id.output.find("--target-columns"), std::string::npos) << eval_id.output;
  rearranged("swapped.csv", "y,x2,x1", {2, 1, 0});
  const Result eval_a = run("eval " + model + " --data " + s.path("data.csv").string());
  const Result eval_b = run("eval " + model + " --data " + s.path("swapped.csv").string());
  ASSERT_EQ(eval_b.exit_code, 0) << eval_b.output;
  EXPECT_EQ(eval_a.output.substr(eval_a.output.find("loss")),
            eval_b.output.substr(eval_b.output.find("loss")));

  // A header without x2: an error naming it, and no output file.
  s.write("renamed.csv", "x1,z,y\n0.5,0.1,0.2\n");
  const Result missing = predict("renamed.csv", "c.csv");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("no column \"x2\""), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("--columns"), std::string::npos) << missing.output;
  EXPECT_FALSE(fs::exists(s.path("c.csv")));
  // --columns still chooses (here by position, as the user says), and a headerless file is read
  // by position as before.
  EXPECT_EQ(run("predict " + model + " --data " + s.path("renamed.csv").string() +
                " --columns x1 z --out " + s.path("d.csv").string())
                .exit_code,
            0);
  s.write("bare.csv", "0.5,0.1,0.2\n");
  EXPECT_EQ(predict("bare.csv", "e.csv").exit_code, 0);
}

// Final parameters of a run directory's model file.
std::vector<double> final_parameters(const fs::path& dir) {
  return io::read_model_file((dir / "model.safetensors").string()).parameters;
}

TEST(Cli, ResumeAfterKillNineIsBitIdentical) {
  Scratch s;
  s.write("data.csv", regression_csv(4000, 2));
  // Bayesian regularization adds ρ to the state the checkpoint file must carry besides λ.
  const std::string config =
      s.write("run.toml", regression_config("checkpoint_every = 1\n", 60) +
                              "[solver]\nregularization = \"bayesian\"\ndamping = \"nielsen\"\n");
  // The uninterrupted run.
  ASSERT_EQ(run("fit " + config + " --quiet --set output_dir=\"straight\"").exit_code, 0);

  // The same run, killed with SIGKILL once its second checkpoint exists.
  const fs::path out = s.path("killed");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string set = "output_dir=\"" + out.string() + "\"";
    execl(LMTRAIN_CLI_PATH, LMTRAIN_CLI_PATH, "fit", config.c_str(), "--quiet", "--set",
          set.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool killed = false;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream epochs(out / "epochs.csv");
    std::string line;
    int lines = 0;
    while (std::getline(epochs, line)) ++lines;
    if (lines >= 3 && fs::exists(out / "checkpoint.safetensors")) {
      kill(child, SIGKILL);
      killed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(killed) << "the run ended before it could be killed";
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));

  const Result resumed = run("fit " + config + " --quiet --resume " + out.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(final_parameters(out), final_parameters(s.path("straight")));
}

struct BadInput {
  std::string name;
  std::string data_file;  // name → content written into the scratch directory
  std::string data_content;
  std::string config_tail;       // appended to a valid config with [data.train] path = data_file
  std::string expected;          // fragment of the message
  std::string model_extra = {};  // extra keys of [model]
};

class BadInputs : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputs, ExitNonZeroWithOneClearMessageAndNoOutput) {
  const BadInput& b = GetParam();
  Scratch s;
  if (!b.data_file.empty()) s.write(b.data_file, b.data_content);
  const std::string config = s.write("run.toml",
                                     "output_dir = \"out\"\n"
                                     "[model]\n" +
                                         b.model_extra +
                                         "layers = [{ type = \"dense\", units = 4 }, { type = "
                                         "\"tanh\" }, { type = \"dense\", units = 1 }]\n" +
                                         b.config_tail);
  const Result r = run("fit " + config + " --quiet");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(b.expected), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lmtrain: error:"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s.path("out"))) << "an output directory was left behind";
}

const std::string kTrain = "[data.train]\npath = \"d.csv\"\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInputs,
    ::testing::Values(
        BadInput{"MissingFile", "", "", kTrain, "d.csv: no such file"},
        BadInput{"UnreadableFile", "d.csv/x", "", kTrain, "d.csv"},
        BadInput{"RaggedRow", "d.csv", "a,b\n1,2\n3\n4,5\n", kTrain, "line 3"},
        BadInput{"NonNumericCell", "d.csv", "a,b\n1,2\n3,abc\n", kTrain, "abc"},
        BadInput{"NaNInData", "d.csv", "a,b\n1,2\nnan,3\n", kTrain, "line 3"},
        BadInput{"SemicolonSeparated", "d.csv", "a;b\n1;2\n3;4\n", kTrain,
                 "separated by ';', set the data file's delimiter key to it"},
        BadInput{"TruncatedNpy", "x.npy", std::string("\x93NUMPY\x01\x00\x10\x00{'descr'", 18),
                 "[data.train]\npath = \"x.npy\"\ntargets_path = \"x.npy\"\n", "x.npy"},
        BadInput{
            "WrongIdxMagic", "x-idx3-ubyte", std::string("\x01\x02\x08\x01\x00\x00\x00\x01\x05", 9),
            "[data.train]\npath = \"x-idx3-ubyte\"\ntargets_path = \"x-idx3-ubyte\"\n", "magic"},
        BadInput{"FannHeaderDisagrees", "d.train", "3 1 1\n0.1\n0.2\n0.3\n0.4\n",
                 "[data.train]\npath = \"d.train\"\n", "d.train"},
        BadInput{"FeatureCountDisagrees", "d.csv", "a,b,c\n1,2,3\n4,5,6\n", kTrain,
                 "has 2 input columns but the model's input layer takes 5", "inputs = 5\n"},
        BadInput{"TargetCountDisagrees", "d.csv", "a,b,c\n1,2,3\n4,5,6\n",
                 "[data.train]\npath = \"d.csv\"\ntargets = [\"b\", \"c\"]\n",
                 "the model's last layer has 1 outputs but the training data has 2 target columns"},
        BadInput{"ShapeNotAList", "d.csv", "a,b\n1,2\n", kTrain, "model.input_shape must be",
                 "input_shape = \"big\"\n"},
        BadInput{"LabelOutOfRange", "d.csv", "a,label\n1,0\n2,1\n3,7\n",
                 "[data]\ntask = \"classification\"\nclasses = 3\n" + kTrain, "7"},
        BadInput{"WrongType", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[trainer]\nmax_epochs = \"ten\"\n",
                 "trainer.max_epochs has the wrong type"},
        BadInput{"OutOfRange", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[solver]\nlambda_decrease = 3.0\n", "solver.lambda_decrease = 3"},
        BadInput{"BackoffOutOfRange", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[solver]\ngeodesic_backoff_max = -3\n",
                 "solver.geodesic_backoff_max = -3"},
        BadInput{"GeodesicNotBoolOrAuto", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[solver]\ngeodesic_acceleration = \"sometimes\"\n",
                 "solver.geodesic_acceleration has the wrong type (string); expected true, false "
                 "or \"auto\""},
        BadInput{"NormalMatrixNotAWay", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[solver]\nnormal_matrix = \"fast\"\n", "solver.normal_matrix"},
        BadInput{"MisspelledKey", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[trainer]\nmax_epoch = 10\n", "did you mean 'trainer.max_epochs'"},
        // Found by the Trainer or inside training, after the data was read: still no directory.
        BadInput{"NegativeHuberDelta", "d.csv", "a,b\n1,2\n3,4\n",
                 kTrain + "[loss]\ntype = \"huber\"\nhuber_delta = -1.0\n", "huber_delta"},
        BadInput{"BceTargetOutsideZeroOne", "d.csv", "a,b\n1,0\n2,1\n3,0.5\n4,1.5\n",
                 kTrain + "[loss]\ntype = \"bce\"\n",
                 "target of sample 3 column 0 is 1.5; loss.type = \"bce\" takes targets in [0, 1]"},
        BadInput{"BeyondFloat32", "d.csv", "a,b\n0.3,1e39\n0.4,2\n",
                 "[data]\nnormalize_targets = \"none\"\n" + kTrain,
                 "d.csv line 2, target \"b\": 1e+39 is beyond float32's range"},
        BadInput{"NaNHintsNoLibraryOption", "d.csv", "a,b\n1,2\nnan,3\n", kTrain,
                 "remove or impute the value (a NaN or ±Inf in training data makes every step "
                 "invalid)\n"}),
    [](const auto& test_param) { return test_param.param.name; });

// The report names options as the config writes them: a run that λ ends (lambda_max = 1e-3 with
// ×10 damping: the first rejected step) says "solver.lambda_max" in its output, summary.txt and
// summary.json; the C++ API's "SolverOptions::" appears in none of them.
TEST(Cli, ReportsNameOptionsAsTheConfigWritesThem) {
  Scratch s;
  s.write("data.csv", regression_csv(300, 2));
  const std::string config =
      s.write("run.toml", regression_config("", 200) +
                              "[solver]\ndamping = \"multiplicative\"\nlambda_initial = 1e-3\n"
                              "lambda_max = 1e-3\n");
  const Result fit = run("fit " + config);
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  for (const std::string& text : {fit.output, read_file(s.path("out") / "summary.txt"),
                                  read_file(s.path("out") / "summary.json")}) {
    EXPECT_NE(text.find("solver.lambda_max = 1.000e-03"), std::string::npos) << text;
    EXPECT_EQ(text.find("SolverOptions::"), std::string::npos) << text;
  }
}

// An option the run does not use (weight_decay without a regularization) is a warning, a report
// line and a summary.json entry, in the config's words; a run of defaults has none.
TEST(Cli, AnIgnoredOptionIsAWarning) {
  Scratch s;
  s.write("data.csv", regression_csv(200, 2));
  const std::string config =
      s.write("run.toml", regression_config("", 2) + "[solver]\nweight_decay = 0.01\n");
  const Result fit = run("fit " + config + " --quiet");
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  const std::string line =
      "solver.weight_decay = 0.01: ignored, solver.regularization is none (l2, bayesian and ard "
      "use it)";
  EXPECT_NE(fit.output.find("lmtrain: warning: " + line), std::string::npos) << fit.output;
  EXPECT_NE(read_file(s.path("out") / "summary.txt").find("Option ignored"), std::string::npos);
  const auto json = nlohmann::json::parse(read_file(s.path("out") / "summary.json"));
  EXPECT_EQ(json.at("options_ignored"), nlohmann::json::array({line}));

  const std::string plain = s.write("plain.toml", regression_config("", 2));
  const Result quiet = run("fit " + plain + " --quiet --set output_dir='\"plain\"'");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("warning"), std::string::npos) << quiet.output;
  EXPECT_TRUE(nlohmann::json::parse(read_file(s.path("plain") / "summary.json"))
                  .at("options_ignored")
                  .empty());
  // The loss's and the trainer's too, in the config's words.
  const Result others = run("fit " + plain +
                            " --quiet --set output_dir='\"others\"' --set loss.huber_delta=2 --set "
                            "trainer.max_validation_failures=3");
  ASSERT_EQ(others.exit_code, 0) << others.output;
  EXPECT_NE(others.output.find("lmtrain: warning: loss.huber_delta = 2: ignored, the loss is mse "
                               "(huber uses it)"),
            std::string::npos)
      << others.output;
  EXPECT_NE(others.output.find("lmtrain: warning: trainer.max_validation_failures = 3: ignored, "
                               "the run has no validation data"),
            std::string::npos)
      << others.output;
}

// solver.tf32 on a machine without TF32: the fit runs as without it (the same final parameters,
// bit for bit) and summary.txt says why the option was not applied, for a float32 system and for
// a float64 one.
TEST(Cli, Tf32IsReportedAsIgnoredOnTheCpu) {
  Scratch s;
  s.write("data.csv", regression_csv(300, 2));
  for (const auto& [precision, why] :
       {std::pair{"float32", "solver.tf32: ignored, the CPU has no TF32 arithmetic"},
        std::pair{"mixed", "solver.tf32: ignored, the system is float64"}}) {
    const std::string base = regression_config("", 3) + "[solver]\n";
    const std::string plain = s.write(std::string("plain-") + precision + ".toml",
                                      std::string("precision = \"") + precision + "\"\n" + base);
    const std::string tf32 =
        s.write(std::string("tf32-") + precision + ".toml",
                std::string("precision = \"") + precision + "\"\n" + base + "tf32 = true\n");
    ASSERT_EQ(run("fit " + plain + " --quiet --set output_dir='\"plain\"'").exit_code, 0);
    const Result fit = run("fit " + tf32 + " --quiet --set output_dir='\"tf32\"'");
    ASSERT_EQ(fit.exit_code, 0) << fit.output;
    EXPECT_NE(read_file(s.path("tf32") / "summary.txt").find(why), std::string::npos) << precision;
    EXPECT_EQ(read_file(s.path("plain") / "summary.txt").find("solver.tf32"), std::string::npos);
    EXPECT_EQ(final_parameters(s.path("tf32")), final_parameters(s.path("plain"))) << precision;
  }
}

// solver.cuda_graphs on the CPU, which runs work as it is queued, and with a solver that does not
// record its attempts: the fit runs as without it (the same final parameters, bit for bit) and
// summary.txt says why the option was not applied.
TEST(Cli, CudaGraphsAreReportedAsIgnoredOnTheCpu) {
  Scratch s;
  s.write("data.csv", regression_csv(300, 2));
  for (const auto& [solver, why] :
       {std::pair{"cholesky", "solver.cuda_graphs: ignored, the CPU runs work as it is queued"},
        std::pair{"eigen",
                  "solver.cuda_graphs: ignored, only the cholesky solver records its attempts "
                  "(linear_solver = eigen)"}}) {
    const std::string base =
        regression_config("", 3) + "[solver]\nlinear_solver = \"" + solver + "\"\n";
    const std::string plain = s.write(std::string("plain-") + solver + ".toml", base);
    const std::string graphs =
        s.write(std::string("graphs-") + solver + ".toml", base + "cuda_graphs = true\n");
    const std::string plain_dir = std::string("plain-") + solver;
    const std::string graphs_dir = std::string("graphs-") + solver;
    ASSERT_EQ(run("fit " + plain + " --quiet --set output_dir='\"" + plain_dir + "\"'").exit_code,
              0);
    const Result fit = run("fit " + graphs + " --quiet --set output_dir='\"" + graphs_dir + "\"'");
    ASSERT_EQ(fit.exit_code, 0) << fit.output;
    EXPECT_NE(read_file(s.path(graphs_dir) / "summary.txt").find(why), std::string::npos)
        << read_file(s.path(graphs_dir) / "summary.txt");
    EXPECT_EQ(read_file(s.path(plain_dir) / "summary.txt").find("cuda_graphs"), std::string::npos);
    EXPECT_EQ(final_parameters(s.path(graphs_dir)), final_parameters(s.path(plain_dir))) << solver;
  }
}

// solver.normal_matrix = "split_k" on the CPU: the fit forms A by split-K (the algorithm a GPU
// may choose), summary.txt says how, and the parameters after 4 float64 steps are the SYRK run's
// to rounding: measured 2.8e-15 (relative, max over parameters; AMD Zen 5, OpenBLAS's Haswell
// kernels) and 9.1e-15 (OPENBLAS_CORETYPE=SkylakeX), bound 1e-9.  With the last partial dropped
// from the sum they move by 3.0e-1.
TEST(Cli, SplitKNormalMatrixOnTheCpuFollowsSyrk) {
  Scratch s;
  s.write("data.csv", regression_csv(2000, 5));
  const std::string config =
      s.write("run.toml", "precision = \"float64\"\n" + regression_config("", 2) + "[solver]\n");
  // batch_size 1000 (the config's is 100: too few rows to split into blocks of ≥ 256).
  const std::string common = " --quiet --set trainer.batch_size=1000 --set output_dir=";
  ASSERT_EQ(run("fit " + config + common + "'\"syrk\"'").exit_code, 0);
  const Result fit =
      run("fit " + config + common + "'\"split\"'" + " --set solver.normal_matrix='\"split_k\"'");
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  const std::string summary = read_file(s.path("split") / "summary.txt");
  // 1 600 training rows: batches of 1 000 and 600.
  for (const char* line : {"n = 49, 1000 rows: split-K, 3 blocks of 334 rows, 1 panel: "
                           "solver.normal_matrix = \"split_k\"",
                           "n = 49, 600 rows: split-K, 2 blocks of 300 rows"})
    EXPECT_NE(summary.find(line), std::string::npos) << summary;
  const std::vector<double> a = final_parameters(s.path("split"));
  const std::vector<double> b = final_parameters(s.path("syrk"));
  ASSERT_EQ(a.size(), b.size());
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    gap = std::max(gap, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  std::printf("split-K vs SYRK after 4 float64 steps: %.3e relative\n", gap / scale);
  EXPECT_LE(gap / scale, 1e-9);
}

// solver.geodesic_acceleration: a config file's false is what the report says, and
// `--set solver.geodesic_acceleration='"auto"'` undoes it (auto is on for an MSE fit).
TEST(Cli, GeodesicAccelerationFalseOrAutoFromTheCommandLine) {
  Scratch s;
  s.write("data.csv", regression_csv(300, 2));
  const std::string config =
      s.write("run.toml", regression_config("", 2) + "[solver]\ngeodesic_acceleration = false\n");
  auto geodesic_line = [&](const std::string& extra) {
    const Result fit = run("fit " + config + " --quiet" + extra);
    EXPECT_EQ(fit.exit_code, 0) << fit.output;
    const std::string summary = read_file(s.path("out") / "summary.txt");
    const std::size_t at = summary.find("Geodesic acceleration");
    return at == std::string::npos ? std::string()
                                   : summary.substr(at, summary.find('\n', at) - at);
  };
  EXPECT_NE(geodesic_line("").find("off: solver.geodesic_acceleration = false"), std::string::npos);
  EXPECT_NE(
      geodesic_line(" --set solver.geodesic_acceleration='\"auto\"'").find("attempts corrected"),
      std::string::npos);
}

TEST(Cli, MixedPrecisionTrainsAFloat32ModelWithAFloat64System) {
  Scratch s;
  s.write("data.csv", regression_csv(500, 1));
  const std::string config = s.write("run.toml", regression_config("", 15));
  const Result fit = run("fit " + config + " --quiet --set precision=\"mixed\"");
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  const std::string summary = read_file(s.path("out") / "summary.txt");
  EXPECT_NE(summary.find("mixed (float32 model and Jacobian, float64 A, g and solve)"),
            std::string::npos)
      << summary;
  const io::ModelFile model = io::read_model_file((s.path("out") / "model.safetensors").string());
  EXPECT_EQ(model.parameter_dtype, io::ParameterDtype::kF32);
  // The model predicts as well as the float32 fit test asks of its model.
  const Result eval = run("eval " + (s.path("out") / "model.safetensors").string() + " --data " +
                          s.path("data.csv").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const auto at = eval.output.find("MSE ");
  ASSERT_NE(at, std::string::npos) << eval.output;
  EXPECT_LT(std::stod(eval.output.substr(at + 4)), 0.01) << eval.output;
}

TEST(Cli, PrecisionAutoSaysWhatItChoseAndWhyAndFloat32StaysFloat32) {
  // precision = "auto" (the default) trains a float32 model and picks its system per problem
  // (SystemPrecision::kAuto): float32 for batches of 100 rows, float64 from 2¹⁴ rows per A.
  Scratch s;
  s.write("data.csv", regression_csv(kMixedPrecisionRows, 5));
  const std::string config = s.write("run.toml", regression_config("", 1));
  auto report = [&](const std::string& extra) {
    const Result fit = run("fit " + config + " --quiet" + extra);
    EXPECT_EQ(fit.exit_code, 0) << fit.output;
    return read_file(s.path("out") / "summary.txt");
  };
  auto line = [](const std::string& text, const std::string& key) {
    const std::size_t at = text.find("\n" + key);
    return at == std::string::npos ? std::string()
                                   : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  std::string summary = report("");
  EXPECT_EQ(line(summary, "Precision"), "Precision                         float32") << summary;
  EXPECT_NE(line(summary, "  because                         auto: A sums 100 residual rows")
                .find("fewer than 16384"),
            std::string::npos)
      << summary;
  // All 2¹⁴ rows in one batch (no test split).
  summary = report(" --set trainer.batch_size=0 --set data.test_fraction=0");
  EXPECT_NE(line(summary, "Precision").find("mixed (float32 model and Jacobian, float64 A"),
            std::string::npos)
      << summary;
  EXPECT_NE(line(summary, "  because                         auto: A sums 16384 residual rows")
                .find("at least 16384"),
            std::string::npos)
      << summary;
  // Asked for, float32 is float32 throughout, with nothing to explain.
  summary = report(
      " --set trainer.batch_size=0 --set data.test_fraction=0 --set "
      "precision=\"float32\"");
  EXPECT_EQ(line(summary, "Precision"), "Precision                         float32") << summary;
  EXPECT_EQ(summary.find("auto: A sums"), std::string::npos) << summary;
  const io::ModelFile model = io::read_model_file((s.path("out") / "model.safetensors").string());
  EXPECT_EQ(model.parameter_dtype, io::ParameterDtype::kF32);
}

TEST(Cli, ArdNamesEachInputColumnAndSwitchesOffTheIrrelevantOne) {
  // y = sin(2x₁) + 0.5·x₂² + a column of noise the target does not depend on.
  Scratch s;
  Rng rng(4);
  std::ostringstream csv;
  csv << "x1,x2,noise,y\n";
  csv.precision(17);
  for (int i = 0; i < 400; ++i) {
    const double a = rng.uniform(-1.5, 1.5), b = rng.uniform(-1, 1), c = rng.normal();
    csv << a << "," << b << "," << c << "," << std::sin(2 * a) + 0.5 * b * b + 0.05 * rng.normal()
        << "\n";
  }
  s.write("data.csv", csv.str());
  const std::string config =
      s.write("run.toml", regression_config("", 40) + "[solver]\nregularization = \"ard\"\n");
  const Result fit = run("fit " + config + " --quiet --set trainer.batch_size=0");
  ASSERT_EQ(fit.exit_code, 0) << fit.output;
  const std::string summary = read_file(s.path("out") / "summary.txt");
  // "  input 2 (noise)    12    1.000e+10    0.00": the weight decay of each input's group.
  std::map<std::string, double> rho;
  std::istringstream lines(summary);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string word, index, name;
    std::size_t size = 0;
    double decay = 0;
    if (fields >> word >> index >> name >> size >> decay && word == "input") rho[name] = decay;
  }
  ASSERT_EQ(rho.size(), 3u) << summary;
  ASSERT_TRUE(rho.count("(noise)") && rho.count("(x1)") && rho.count("(x2)")) << summary;
  EXPECT_GT(rho["(noise)"], 100 * std::max(rho["(x1)"], rho["(x2)"])) << summary;
  EXPECT_NE(summary.find("mixed (float32 model"), std::string::npos) << summary;
}

TEST(Cli, NcclOnTheCpuIsAClearErrorBeforeAnyOutput) {
  Scratch s;
  s.write("data.csv", regression_csv(100, 1));
  const std::string config = s.write("run.toml", regression_config("", 2));
  const Result r = run("fit " + config + " --quiet --set communicator=\"nccl\"");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("communicator = \"nccl\" sums GPU buffers but device = \"cpu\""),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(s.path("out")));
}

TEST(Cli, InfoDevicesListsTheCpuTheCudaDevicesAndTheRankTransports) {
  const Result r = run("info --devices");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu       cpu ("), std::string::npos) << r.output;
  const int devices = cuda_device_count();
  for (int i = 0; i < devices; ++i)
    EXPECT_NE(r.output.find(cuda_device_description(i)), std::string::npos) << r.output;
  if (devices == 0) {
    EXPECT_NE(r.output.find("no device visible"), std::string::npos) << r.output;
  }
  const std::string ranks = std::string("ranks     mpi ") +
                            (dist::mpi_built() ? "built" : "not built") + ", nccl " +
                            (dist::nccl_built() ? "built" : "not built");
  EXPECT_NE(r.output.find(ranks), std::string::npos) << r.output;
}

// `lmtrain info --plan RUN.toml --ranks R`: the plan of 4 ranks without training, in auto's
// order as the per-rank budget shrinks — replicated cholesky, then A's shares, then cg.  2-400-1
// has n = 1 601 parameters: 26 blocks of 64 (the last of 1 row), 13 full ones on process row 0
// of the 2×2 grid, so the largest share is 832² float64 values.
TEST(Cli, InfoPlanFollowsAutosOrderOverTheRanksWithoutTraining) {
  Scratch s;
  s.write("data.csv", regression_csv(400, 1));
  const std::string config = s.write(
      "run.toml",
      "precision = \"float64\"\noutput_dir = \"out\"\n[model]\nlayers = [{ type = \"dense\", "
      "units = 400 }, { type = \"tanh\" }, { type = \"dense\", units = 1 }]\n[data.train]\npath "
      "= \"data.csv\"\ntargets = [\"y\"]\n[trainer]\nmax_epochs = 1\nbatch_size = 100\n");
  const auto plan = [&](int ranks, std::size_t budget) {
    return run("info --plan " + config + " --ranks " + std::to_string(ranks) +
               " --set solver.memory_budget_bytes=" + std::to_string(budget));
  };
  const Result roomy = plan(4, 100'000'000);
  ASSERT_EQ(roomy.exit_code, 0) << roomy.output;
  EXPECT_NE(roomy.output.find("auto → cholesky"), std::string::npos) << roomy.output;
  EXPECT_NE(roomy.output.find("normal matrix 19.56 MiB"), std::string::npos) << roomy.output;

  const Result tight = plan(4, 20'000'000);  // below A's 19.56 MiB and the rest
  ASSERT_EQ(tight.exit_code, 0) << tight.output;
  if (!dist::distributed_normal_matrix_built(DeviceKind::kCpu)) {
    EXPECT_NE(tight.output.find("auto → cg"), std::string::npos) << tight.output;
    GTEST_SKIP() << "built without ScaLAPACK: no distributed_cholesky";
  }
  EXPECT_NE(tight.output.find("auto → distributed_cholesky"), std::string::npos) << tight.output;
  EXPECT_NE(tight.output.find("2×2 process grid of 4 ranks"), std::string::npos) << tight.output;
  // Auto blocks: 1601 / (8 · 2) = 100 → 96; process (0, 0) holds 9 of the 17 blocks a side.
  const dist::ProcessGrid grid = dist::ProcessGrid::for_ranks(4, 0);
  ASSERT_EQ(dist::BlockCyclicLayout::block_size(0, 1601, grid), 96u);
  const dist::BlockCyclicLayout layout{1601, 96, grid};
  ASSERT_EQ(layout.largest_share(), 833u * 833u);
  EXPECT_NE(tight.output.find("normal matrix " + format_bytes(833 * 833 * sizeof(double))),
            std::string::npos)
      << tight.output;

  const Result small = plan(4, 4'000'000);  // not even A's shares
  ASSERT_EQ(small.exit_code, 0) << small.output;
  EXPECT_NE(small.output.find("auto → cg"), std::string::npos) << small.output;
  EXPECT_NE(small.output.find("nor do its shares over the ranks"), std::string::npos)
      << small.output;
  std::vector<std::string> files = s.files();  // nothing trained, nothing written
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"data.csv", "run.toml"}));

  const Result none = run("info --plan " + config + " --ranks 0");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("--ranks 0: expected ≥ 1 ranks"), std::string::npos) << none.output;
}

// LMTRAIN_SIMD forces the activation loops' instruction set; a name the CPU cannot run (or an
// unknown one) is a clear error at startup, not an illegal instruction in the middle of training.
TEST(Cli, ForcedSimdPathIsNamedAndAnUnknownOneIsAClearError) {
  const Result baseline = run_with_env("LMTRAIN_SIMD=baseline", "info --devices");
  ASSERT_EQ(baseline.exit_code, 0) << baseline.output;
  EXPECT_NE(baseline.output.find("baseline loops"), std::string::npos) << baseline.output;
  const Result bogus = run_with_env("LMTRAIN_SIMD=avx1024", "info --devices");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_NE(bogus.output.find("LMTRAIN_SIMD = avx1024: expected baseline, avx2 or avx512"),
            std::string::npos)
      << bogus.output;
  Scratch s;
  s.write("data.csv", regression_csv(100, 1));
  const std::string config = s.write("run.toml", regression_config("", 2));
  const Result fit = run_with_env("LMTRAIN_SIMD=avx1024", "fit " + config + " --quiet");
  EXPECT_EQ(fit.exit_code, 2) << fit.output;
  EXPECT_FALSE(fs::exists(s.path("out"))) << "an output directory was left behind";
}

TEST(Cli, CudaWithoutADeviceIsAClearErrorBeforeAnyOutput) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  Scratch s;
  s.write("data.csv", regression_csv(100, 1));
  const std::string config = s.write("run.toml", regression_config("", 2));
  const Result r = run("fit " + config + " --quiet --set device=\"cuda\"");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // A build with CUDA sees no device here; one without (the sanitizer build) says so instead.
  const bool no_device =
      r.output.find("device = \"cuda\" but 0 CUDA device(s) are visible") != std::string::npos;
  const bool not_built =
      r.output.find("device = \"cuda\" but lmtrain was built without CUDA") != std::string::npos;
  EXPECT_TRUE(no_device || not_built) << r.output;
  EXPECT_FALSE(fs::exists(s.path("out"))) << "an output directory was left behind";
}

TEST(Cli, PredictWithBadDataLeavesNoOutputFile) {
  Scratch s;
  s.write("data.csv", regression_csv(200, 4));
  const std::string config = s.write("run.toml", regression_config("", 3));
  ASSERT_EQ(run("fit " + config + " --quiet").exit_code, 0);
  s.write("bad.csv", "x1,x2\n1,2\n3,oops\n");
  const Result r = run("predict " + (s.path("out") / "model.safetensors").string() + " --data " +
                       s.path("bad.csv").string() + " --out " + s.path("pred.csv").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("oops"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s.path("pred.csv")));
}

// A loss that overflows float32 during training: exit 3, a message saying the loss is not finite,
// and no model file (summary.txt may describe the failure).
TEST(Cli, NonFiniteLossExitsThreeWithoutModel) {
  Scratch s;
  std::ostringstream csv;
  csv << "x1,x2,x3,x4,y\n";
  for (int i = 0; i < 50; ++i) {
    const double x = 3e38 + 1e36 * (i % 7);  // near FLT_MAX (3.4e38): the forward pass overflows
    csv << x << "," << x << "," << x << "," << x << "," << 0.01 * i << "\n";
  }
  s.write("data.csv", csv.str());
  const std::string config =
      s.write("run.toml",
              "precision = \"float32\"\noutput_dir = \"out\"\n"
              // 256 linear units: with torch's init about 5 % of them sum past FLT_MAX, so some do.
              "[model]\nlayers = [{ type = \"dense\", units = 256 }, { type = \"identity\" }, "
              "{ type = \"dense\", units = 1 }]\n"
              "[data]\nnormalize_inputs = \"none\"\nnormalize_targets = \"none\"\n"
              "[data.train]\npath = \"data.csv\"\ntargets = [\"y\"]\n"
              "[trainer]\nmax_epochs = 3\nbatch_size = 0\n");
  const Result r = run("fit " + config + " --quiet");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("not finite"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s.path("out") / "model.safetensors")) << "a model was written";
}

// ---- a stop that stops (issue 28) -------------------------------------------------------------

// `lmtrain fit` started in the background with one environment assignment, its stderr in a file.
struct Background {
  pid_t pid = -1;
  fs::path log;
};

Background start_fit(const Scratch& s, const std::string& config, const std::string& assignment,
                     const std::vector<std::string>& sets = {}) {
  Background b;
  b.log = s.path("fit.log");
  b.pid = fork();
  if (b.pid == 0) {
    const int fd = ::open(b.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    dup2(fd, STDOUT_FILENO);
    putenv(const_cast<char*>(assignment.c_str()));
    std::vector<std::string> args{LMTRAIN_CLI_PATH, "fit", config};
    for (const auto& set : sets) args.insert(args.end(), {"--set", set});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(LMTRAIN_CLI_PATH, argv.data());
    _exit(127);
  }
  return b;
}

// Waits until `text` appears in the log (true) or `seconds` pass (false).
bool wait_for_log(const Background& b, const std::string& text, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (read_file(b.log).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The exit status within `seconds`, and how long it took; a process still running then is killed
// (status -1), so that a hang fails the test instead of hanging CI.
std::pair<int, double> wait_exit(const Background& b, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(b.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(b.pid, SIGKILL);
      waitpid(b.pid, &status, 0);
      return {-1, seconds};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), took};
}

// 400 training rows in batches of 100: 4 LM steps per epoch, a checkpoint after each epoch.  Step
// 9 (the first of epoch 3) sleeps 600 s: a step that runs on.
constexpr const char* kSlowStep9 = "LMTRAIN_TEST_SLOW_STEP=9:600";

TEST(Cli, SecondSigtermEndsAStepThatRunsOnAt143AndTheCheckpointLoads) {
  Scratch s;
  s.write("data.csv", regression_csv(500, 5));
  const std::string config = s.write("run.toml", regression_config("checkpoint_every = 1\n", 6));
  const Background fit = start_fit(s, config, kSlowStep9);
  ASSERT_TRUE(wait_for_log(fit, "sleeping 600 s after step 9", 120)) << read_file(fit.log);
  kill(fit.pid, SIGTERM);  // a stop after the step: it would wait for the 600 s
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(fit.pid, SIGTERM);
  const auto [status, seconds] = wait_exit(fit, 20);  // far below the 30 s grace period
  EXPECT_EQ(status, 143) << read_file(fit.log);
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(read_file(fit.log).find("second signal: stopping at once"), std::string::npos);
  // The checkpoint of epoch 2 was left whole: the run resumes from it to the end.
  EXPECT_FALSE(fs::exists(s.path("out") / "model.safetensors"));
  const Result resumed = run("fit " + config + " --quiet --resume " + s.path("out").string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string epochs = read_file(s.path("out") / "epochs.csv");
  EXPECT_NE(epochs.find("\n6,"), std::string::npos) << epochs;
  EXPECT_TRUE(fs::exists(s.path("out") / "model.safetensors"));
}

TEST(Cli, StepStillRunningAfterTheGracePeriodEndsTheProcessAt130) {
  Scratch s;
  s.write("data.csv", regression_csv(500, 6));
  const std::string config = s.write("run.toml", regression_config("checkpoint_every = 1\n", 6));
  const Background fit = start_fit(s, config, kSlowStep9, {"trainer.stop_grace_s=1.5"});
  ASSERT_TRUE(wait_for_log(fit, "sleeping 600 s after step 9", 120)) << read_file(fit.log);
  kill(fit.pid, SIGINT);
  const auto [status, seconds] = wait_exit(fit, 30);
  EXPECT_EQ(status, 130) << read_file(fit.log);
  EXPECT_GE(seconds, 1.4);
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(read_file(fit.log).find("still runs 1.5 s after signal 2"), std::string::npos)
      << read_file(fit.log);
  EXPECT_EQ(run("fit " + config + " --quiet --resume " + s.path("out").string()).exit_code, 0);
}

TEST(Cli, FirstSigtermStopsAfterTheStepWithACheckpointAt143) {
  Scratch s;
  s.write("data.csv", regression_csv(500, 7));
  const std::string config = s.write("run.toml", regression_config("checkpoint_every = 0\n", 6));
  const Background fit = start_fit(s, config, "LMTRAIN_TEST_SLOW_STEP=9:1");
  ASSERT_TRUE(wait_for_log(fit, "sleeping 1 s after step 9", 120)) << read_file(fit.log);
  kill(fit.pid, SIGTERM);
  const auto [status, seconds] = wait_exit(fit, 30);
  EXPECT_EQ(status, 143) << read_file(fit.log);
  EXPECT_NE(read_file(fit.log).find("interrupted by signal 15; checkpoint saved"),
            std::string::npos)
      << read_file(fit.log);
  // checkpoint_every = 0: the file is the one written on the signal, after step 9.
  EXPECT_TRUE(fs::exists(s.path("out") / "checkpoint.safetensors"));
  EXPECT_EQ(run("fit " + config + " --quiet --resume " + s.path("out").string()).exit_code, 0);
}

// `lmtrain fit run.toml | head -n 1`: the reader goes away after the first epoch's line.  The
// next line's write raises SIGPIPE, which used to kill the run between checkpoints; it stops the
// run as SIGTERM does, with a checkpoint, and the resumed run ends where an uninterrupted one does.
TEST(Cli, AClosedOutputPipeStopsWithACheckpointAt141AndTheResumeEndsAsTheStraightRun) {
  Scratch s;
  s.write("data.csv", regression_csv(500, 7));
  const std::string config = s.write("run.toml", regression_config("", 40));
  ASSERT_EQ(run("fit " + config + " --quiet --set output_dir=\"straight\"").exit_code, 0);
  // Step 7 (the second epoch's second) waits 1 s: head has read epoch 1's line and left by then.
  const std::string log = s.path("fit.log").string();
  const Result piped =
      run_command("bash -c 'LMTRAIN_TEST_SLOW_STEP=7:1 " + std::string(LMTRAIN_CLI_PATH) + " fit " +
                  config + " 2>" + log + " | head -n 1; echo \"status ${PIPESTATUS[0]}\"'");
  EXPECT_NE(piped.output.find("epoch    1/40"), std::string::npos) << piped.output;
  EXPECT_NE(piped.output.find("status 141"), std::string::npos) << piped.output << read_file(log);
  EXPECT_NE(read_file(log).find("interrupted by signal 13 (SIGPIPE: the reader of the output went "
                                "away); checkpoint saved"),
            std::string::npos)
      << read_file(log);
  EXPECT_FALSE(fs::exists(s.path("out") / "model.safetensors"));
  const Result resumed = run("fit " + config + " --quiet --resume " + s.path("out").string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(final_parameters(s.path("out")), final_parameters(s.path("straight")));
}

TEST(Cli, BadStopGraceIsAClearError) {
  Scratch s;
  s.write("data.csv", regression_csv(100, 8));
  const std::string config = s.write("run.toml", regression_config("stop_grace_s = -1\n", 2));
  const Result r = run("fit " + config + " --quiet");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("stop_grace_s = -1 violates: stop_grace_s ≥ 0"), std::string::npos)
      << r.output;
}

// ---- OpenMP settings that made OpenBLAS wait forever (issue 28) ------------------------------

struct OpenMpSetting {
  std::string name;
  std::string environment;  // for `env`
  std::string reference;    // the explicit thread count it amounts to (same results, bit for bit)
  std::string report;       // in the Summary's Threads lines
};

void PrintTo(const OpenMpSetting& s, std::ostream* out) {
  *out << s.environment;
}

class OpenMpSettings : public ::testing::TestWithParam<OpenMpSetting> {};

// A 2-256-1 network (1 025 parameters) in batches of 800: SYRK of 4.2·10⁸ multiply-adds, above
// the 2²⁸ from which OpenBLAS runs it on several threads.  Before issue 28 each of these settings
// hung inside OpenBLAS's threaded SYRK for ever (OMP_DYNAMIC=true when the load average of the
// last 15 minutes is ≥ 1 on 2 cores): the run has 120 s before `timeout` kills it.
TEST_P(OpenMpSettings, FinishWithTheirThreadCountsResults) {
  const OpenMpSetting& p = GetParam();
  Scratch s;
  s.write("data.csv", regression_csv(2000, 9));
  const std::string config = s.write(
      "run.toml",
      "seed = 3\noutput_dir = \"out\"\n[model]\nlayers = [{ type = \"dense\", units = 256 }, "
      "{ type = \"tanh\" }, { type = \"dense\", units = 1 }]\n[data]\ntest_fraction = 0.2\n"
      "[data.train]\npath = \"data.csv\"\ntargets = [\"y\"]\n[trainer]\nmax_epochs = 2\n"
      "batch_size = 800\ncheckpoint_every = 0\n");
  const auto fit = [&](const std::string& environment, const std::string& dir) {
    return run_command("timeout -s KILL 120 env " + environment + " " + LMTRAIN_CLI_PATH + " fit " +
                       config + " --quiet --set output_dir=\"" + s.path(dir).string() + "\"");
  };
  const Result r = fit(p.environment, "setting");
  ASSERT_EQ(r.exit_code, 0) << p.environment << ": " << (r.exit_code == 137 ? "hung" : r.output);
  const std::string summary = read_file(s.path("setting") / "summary.txt");
  EXPECT_NE(summary.find(p.report), std::string::npos) << summary;
  ASSERT_EQ(fit(p.reference, "reference").exit_code, 0);
  EXPECT_EQ(final_parameters(s.path("setting")), final_parameters(s.path("reference")));
}

std::string cores() {
  return std::to_string(std::max(1u, std::thread::hardware_concurrency()));
}
std::string above_cores() {
  return std::to_string(std::max(1u, std::thread::hardware_concurrency()) + 2);
}

INSTANTIATE_TEST_SUITE_P(
    Issue28, OpenMpSettings,
    ::testing::Values(
        OpenMpSetting{"dynamic_above_cores", "OMP_DYNAMIC=true OMP_NUM_THREADS=" + above_cores(),
                      "OMP_NUM_THREADS=" + cores(), "OMP_DYNAMIC = true: turned off"},
        OpenMpSetting{"thread_limit", "OMP_THREAD_LIMIT=1", "OMP_NUM_THREADS=1",
                      "OMP_THREAD_LIMIT = 1: at most 1 thread"},
        OpenMpSetting{"no_active_level", "OMP_MAX_ACTIVE_LEVELS=0", "OMP_NUM_THREADS=1",
                      "OMP_MAX_ACTIVE_LEVELS = 0 allows no parallel region"},
        OpenMpSetting{
            "nested",
            "OMP_NESTED=true OMP_MAX_ACTIVE_LEVELS=4 OMP_NUM_THREADS=" + above_cores() + ",2",
            "OMP_NUM_THREADS=" + cores(), "is more than the"}),
    [](const ::testing::TestParamInfo<OpenMpSetting>& i) { return i.param.name; });

}  // namespace
}  // namespace lmtrain::cli
