// The gnuplot scripts of a run directory draw the columns they name: every `using X:Y` of every
// plot is checked against the CSV header, on headers in the order lmtrain writes them and in a
// shuffled order (a new column must never shift what a plot draws).
#include "cli/plots.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace lmtrain::cli {
namespace {

namespace fs = std::filesystem;

class RunDir {
 public:
  RunDir() {
    std::string templ = (fs::temp_directory_path() / "lmtrain-plots-XXXXXX").string();
    dir_ = mkdtemp(templ.data());
  }
  ~RunDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path() const { return dir_.string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
  }

 private:
  fs::path dir_;
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = line.find(',', start);
    out.push_back(line.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// (x column name, y column name) of each `using X:Y` in a script, resolved through `header`.
std::vector<std::pair<std::string, std::string>> drawn(const std::string& body,
                                                       const std::vector<std::string>& header) {
  std::vector<std::pair<std::string, std::string>> out;
  // A plain scan rather than std::regex: GCC 12 reports a false maybe-uninitialized inside
  // <regex> in the sanitizer build, where warnings are errors.
  const std::string key = "using ";
  for (auto at = body.find(key); at != std::string::npos; at = body.find(key, at + 1)) {
    std::size_t x_end = 0, y_end = 0;
    const auto from = at + key.size();
    if (from >= body.size() || !std::isdigit(static_cast<unsigned char>(body[from]))) continue;
    const auto x = std::stoul(body.substr(from), &x_end) - 1;
    if (body[from + x_end] != ':') continue;
    const auto y = std::stoul(body.substr(from + x_end + 1), &y_end) - 1;
    out.emplace_back(x < header.size() ? header[x] : "?", y < header.size() ? header[y] : "?");
  }
  return out;
}

void expect_plots_draw_named_columns(const std::string& epochs_header,
                                     const std::string& fit_header) {
  RunDir run;
  const std::vector<std::string> eh = split(epochs_header), fh = split(fit_header);
  // Two epochs with a validation loss in every row, values in the columns the header names.
  const std::map<std::string, std::string> epoch_values = {
      {"epoch", "1"},      {"training_loss", "0.5"}, {"validation_loss", "0.6"},
      {"lambda", "0.001"}, {"accepted", "20"},       {"rejected", "3"},
      {"invalid", "0"},    {"gradient_norm", "0.1"}, {"step_norm", "0.2"},
      {"seconds", "0.25"}};
  std::string epochs = epochs_header + "\n";
  for (int row = 0; row < 2; ++row) {
    std::vector<std::string> cells;
    for (const auto& name : eh) cells.push_back(epoch_values.at(name));
    for (std::size_t i = 0; i < cells.size(); ++i)
      epochs += cells[i] + (i + 1 < cells.size() ? "," : "\n");
  }
  run.write("epochs.csv", epochs);
  run.write("fit.csv", fit_header + "\n0.1,0.2,0.3\n");
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_png;
  for (const PlotScript& p : plot_scripts(run.path()))
    by_png[p.png] = drawn(p.body, p.png == "fit.png" ? fh : eh);
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(by_png["loss_epoch.png"],
            (Pairs{{"epoch", "training_loss"}, {"epoch", "validation_loss"}}));
  EXPECT_EQ(by_png["loss_time.png"],
            (Pairs{{"seconds", "training_loss"}, {"seconds", "validation_loss"}}));
  EXPECT_EQ(by_png["fit.png"], (Pairs{{"x", "y"}, {"x", "prediction"}}));
}

TEST(Plots, DrawTheColumnsTheyNameInLmtrainsOrder) {
  expect_plots_draw_named_columns(
      "epoch,training_loss,validation_loss,lambda,accepted,rejected,invalid,gradient_norm,"
      "step_norm,seconds",
      "x,y,prediction");
}

TEST(Plots, DrawTheColumnsTheyNameInAnyOrder) {
  expect_plots_draw_named_columns(
      "seconds,invalid,validation_loss,lambda,epoch,step_norm,accepted,training_loss,rejected,"
      "gradient_norm",
      "prediction,x,y");
}

TEST(Plots, AMissingColumnIsAnErrorNamingIt) {
  RunDir run;
  run.write("epochs.csv", "epoch,training_loss,validation_loss\n1,0.5,\n");
  try {
    (void)plot_scripts(run.path());
    FAIL() << "expected an error for the missing seconds column";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no column named \"seconds\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::cli
