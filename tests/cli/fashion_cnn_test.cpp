// W4's SimpleCNN trained through the `lmtrain` binary on a 6 000-image subset of Fashion-MNIST
// for a few epochs; test accuracy on 2 000 held-out test images must clear 70 % (chance: 10 %).
// The accuracy is recomputed here from `lmtrain predict`'s classes and the labels read straight
// from the IDX file (gzip, then the format's header), not taken from lmtrain's own report.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lmtrain/records/model_file.h"

namespace {

namespace fs = std::filesystem;

const fs::path kDataDir = "/usr/share/datasets/fashion-mnist";

// Runs `command`, returns its exit status and output.
int run(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  return pclose(pipe);
}

// The labels of an IDX1 file (gzip-compressed as distributed): 4 bytes magic 0x00000801 (u8
// values, one dimension), a big-endian u32 count, then one byte per label.
std::vector<int> read_idx1_labels(const fs::path& path) {
  std::string bytes;
  const int status = run("gzip -dc '" + path.string() + "'", bytes);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "gzip -dc " << path;
  if (bytes.size() < 8) return {};
  const auto u8 = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i]));
  };
  const std::uint32_t magic = u8(0) << 24 | u8(1) << 16 | u8(2) << 8 | u8(3);
  const std::uint32_t count = u8(4) << 24 | u8(5) << 16 | u8(6) << 8 | u8(7);
  EXPECT_EQ(magic, 0x00000801u) << path;
  EXPECT_EQ(bytes.size(), 8 + std::size_t{count}) << path;
  std::vector<int> labels;
  for (std::size_t i = 8; i < bytes.size(); ++i) labels.push_back(static_cast<int>(u8(i)));
  return labels;
}

struct Prediction {
  int label = -1;
  std::vector<double> probabilities;
};

// `lmtrain predict`'s CSV for a classifier: header "class,p0,…,p9", then one row per image.
std::vector<Prediction> read_predictions(const fs::path& path, std::size_t classes) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::string header = "class";
  for (std::size_t c = 0; c < classes; ++c) header += ",p" + std::to_string(c);
  EXPECT_EQ(line, header) << path;
  std::vector<Prediction> rows;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field;
    Prediction row;
    std::getline(fields, field, ',');
    row.label = std::stoi(field);
    while (std::getline(fields, field, ',')) row.probabilities.push_back(std::stod(field));
    rows.push_back(row);
  }
  return rows;
}

bool fashion_mnist_installed() {
  return fs::exists(kDataDir / "train-images-idx3-ubyte.gz");
}
constexpr const char* kNotInstalled =
    "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist; "
    "scripts/install-deps.sh installs it)";

// Fits examples/fashion-cnn/run.toml (with `settings` added to the command line) on 6 000 images
// for 5 epochs and scores `lmtrain predict` on the first 2 000 test images into *accuracy.
void fit_and_score(const std::string& settings, double* accuracy) {
  // A directory of this process: checkouts that run their tests at the same time must not share
  // one.
  std::string scratch = (fs::temp_directory_path() / "lmtrain-fashion-cnn-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(scratch.data()), nullptr) << scratch;
  const fs::path out = fs::path(scratch) / "run";
  constexpr std::size_t kTestRows = 2000, kClasses = 10;
  std::string output;
  int status =
      run(std::string(LMTRAIN_CLI_PATH) + " fit " + LMTRAIN_SOURCE_DIR +
              "/examples/fashion-cnn/run.toml --quiet --set data.train.rows=6000 "
              "--set data.test.rows=" +
              std::to_string(kTestRows) + " --set trainer.max_epochs=5 --set output_dir=\\\"" +
              out.string() + "\\\" " + settings,
          output);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  const lmtrain::io::ModelFile model =
      lmtrain::io::read_model_file((out / "model.safetensors").string());
  EXPECT_EQ(model.architecture.num_params(), 1026u);

  // The trained model's classes for the whole test file; the fit used its first 2 000 images.
  output.clear();
  status = run(std::string(LMTRAIN_CLI_PATH) + " predict " + (out / "model.safetensors").string() +
                   " --data " + (kDataDir / "t10k-images-idx3-ubyte.gz").string() + " --out " +
                   (out / "predictions.csv").string(),
               output);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  const std::vector<Prediction> predictions = read_predictions(out / "predictions.csv", kClasses);
  const std::vector<int> labels = read_idx1_labels(kDataDir / "t10k-labels-idx1-ubyte.gz");
  ASSERT_EQ(labels.size(), 10000u);
  ASSERT_EQ(predictions.size(), labels.size());
  std::size_t right = 0, right_all = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const Prediction& p = predictions[i];
    ASSERT_EQ(p.probabilities.size(), kClasses) << "row " << i;
    // The class is the most probable one, and the probabilities are a distribution.
    const auto most = std::max_element(p.probabilities.begin(), p.probabilities.end());
    EXPECT_EQ(p.label, most - p.probabilities.begin()) << "row " << i;
    double sum = 0;
    for (double q : p.probabilities) sum += q;
    EXPECT_NEAR(sum, 1.0, 1e-7) << "row " << i;
    const bool hit = p.label == labels[i];
    right += i < kTestRows && hit;
    right_all += hit;
  }
  *accuracy = static_cast<double>(right) / kTestRows;
  const double accuracy_all = static_cast<double>(right_all) / static_cast<double>(labels.size());
  ::testing::Test::RecordProperty("test_accuracy", std::to_string(*accuracy));
  ::testing::Test::RecordProperty("test_accuracy_all_10000", std::to_string(accuracy_all));
  std::printf("test accuracy %.4f on the first %zu test images, %.4f on all %zu\n", *accuracy,
              kTestRows, accuracy_all, labels.size());
  // What the fit reported for the same 2 000 images.
  ASSERT_TRUE(model.provenance.contains("test_accuracy")) << model.provenance.dump();
  EXPECT_NEAR(model.provenance["test_accuracy"].get<double>(), *accuracy, 0.5 / kTestRows);
  fs::remove_all(scratch);
}

// Each loss type's floor on the first 2 000 test images after 5 epochs (chance: 10 %).
// cross_entropy_sampled, one sampled Gauss–Newton row per image instead of ten: 69.9 % at seed 0
// here; over the seeds 1–20 of `lmtrain_workloads W4 --loss cross_entropy_sampled` (the same
// subset and steps) 69.5–76.2 %, against 47.6–66.2 % for cross_entropy_sqrt.
struct FashionCase {
  const char* name;
  const char* settings;  // added to the fit's command line
  double min_accuracy;
};

class FashionCnn : public ::testing::TestWithParam<FashionCase> {};

TEST_P(FashionCnn, SixThousandImagesReachTheLossTypesAccuracy) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << kNotInstalled;
  double accuracy = 0;
  fit_and_score(GetParam().settings, &accuracy);
  if (HasFatalFailure()) return;
  EXPECT_GE(accuracy, GetParam().min_accuracy);
}

INSTANTIATE_TEST_SUITE_P(
    LossTypes, FashionCnn,
    ::testing::Values(FashionCase{"cross_entropy", "", 0.70},
                      FashionCase{"cross_entropy_sampled",
                                  "--set loss.type=\\\"cross_entropy_sampled\\\"", 0.65}),
    [](const auto& test_param) { return std::string(test_param.param.name); });

}  // namespace
