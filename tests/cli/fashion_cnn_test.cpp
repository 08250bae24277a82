// W4's SimpleCNN trained through the `lmtrain` binary on a 6 000-image subset of Fashion-MNIST
// for a few epochs; test accuracy on 2 000 held-out test images must clear 70 % (chance: 10 %).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "lmtrain/io/model_file.h"

namespace {

namespace fs = std::filesystem;

TEST(FashionCnn, SixThousandImagesReachSeventyPercentTestAccuracy) {
  const fs::path images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  if (!fs::exists(images))
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist; "
                    "scripts/install-deps.sh installs it)";
  const fs::path out = fs::temp_directory_path() / "lmtrain-fashion-cnn-test";
  fs::remove_all(out);
  const std::string command =
      std::string(LMTRAIN_CLI_PATH) + " fit " + LMTRAIN_SOURCE_DIR +
      "/examples/fashion-cnn/run.toml --quiet --set data.train.rows=6000 --set data.test.rows=2000 "
      "--set trainer.max_epochs=5 --set output_dir=\\\"" + out.string() + "\\\" 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  const lmtrain::io::ModelFile model = lmtrain::io::read_model_file((out / "model.safetensors").string());
  EXPECT_EQ(model.architecture.num_params(), 1026u);
  ASSERT_TRUE(model.provenance.contains("test_accuracy")) << model.provenance.dump();
  const double accuracy = model.provenance["test_accuracy"].get<double>();
  RecordProperty("test_accuracy", std::to_string(accuracy));
  EXPECT_GE(accuracy, 0.70);
  fs::remove_all(out);
}

}  // namespace
