#include "plots.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "lmtrain/core/error.h"
#include "lmtrain/io/atomic_write.h"

namespace lmtrain::cli {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) {
    if (c == '\'')
      s += "''";
    else
      s += c;
  }
  return s + "'";
}

// Runs gnuplot on `script`; returns false with the reason on failure.
bool run_gnuplot(const std::string& script, const fs::path& dir, std::string* why) {
  const fs::path script_path = dir / ".plot.gp";
  io::write_file_atomically(script_path.string(), script);
  const std::string command =
      fmt::format("gnuplot {} 2>{}", quoted(script_path), quoted(dir / ".plot.log"));
  const int status = std::system(command.c_str());
  std::error_code ec;
  fs::remove(script_path, ec);
  if (status != 0) {
    std::ifstream log(dir / ".plot.log");
    std::string first;
    std::getline(log, first);
    *why = WIFEXITED(status) && WEXITSTATUS(status) == 127
               ? "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox); plots "
                 "skipped"
               : fmt::format("gnuplot failed: {}", first);
    fs::remove(dir / ".plot.log", ec);
    return false;
  }
  fs::remove(dir / ".plot.log", ec);
  return true;
}

// The header of a CSV file, split at commas.
std::vector<std::string> csv_header(const fs::path& csv) {
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  std::vector<std::string> names;
  std::size_t start = 0;
  for (;;) {
    const auto comma = header.find(',', start);
    names.push_back(header.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

// gnuplot's 1-based number of the column named `name`; throws when the file has none, so that a
// plot never silently draws another column.
int column_number(const fs::path& csv, const std::vector<std::string>& header,
                  const std::string& name) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i) + 1;
  throw InvalidArgument(
      fmt::format("{}: no column named \"{}\" in its header ({}); the file was not "
                  "written by this version of lmtrain",
                  csv.string(), name, fmt::join(header, ",")));
}

bool has_column_with_values(const fs::path& csv, int column) {
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  while (std::getline(in, line)) {
    int c = 1;
    std::size_t start = 0;
    for (;;) {
      const auto comma = line.find(',', start);
      if (c == column) {
        const std::string cell =
            line.substr(start, comma == std::string::npos ? comma : comma - start);
        if (!cell.empty() && cell != "nan") return true;
        break;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
      ++c;
    }
  }
  return false;
}

}  // namespace

std::vector<PlotScript> plot_scripts(const std::string& run_dir) {
  const fs::path dir(run_dir);
  std::vector<PlotScript> plots;
  const fs::path epochs = dir / "epochs.csv";
  if (fs::exists(epochs)) {
    const std::vector<std::string> header = csv_header(epochs);
    const int training = column_number(epochs, header, "training_loss");
    const int validation = column_number(epochs, header, "validation_loss");
    const bool has_validation = has_column_with_values(epochs, validation);
    for (const auto& [png, column, label] :
         {std::tuple{"loss_epoch.png", "epoch", "epoch"},
          std::tuple{"loss_time.png", "seconds", "wall-clock seconds"}}) {
      const int x = column_number(epochs, header, column);
      std::string body = fmt::format(
          "set logscale y\nset format y '%.0e'\nset xlabel '{}'\nset ylabel 'loss'\n"
          "set title 'lmtrain: loss against {}'\n"
          "plot {} using {}:{} skip 1 with linespoints lw 2 pt 7 ps 0.5 title 'training'",
          label, label, quoted(epochs), x, training);
      if (has_validation)
        body += fmt::format(
            ", {} using {}:{} skip 1 with linespoints lw 2 pt 5 ps 0.5 title 'validation'",
            quoted(epochs), x, validation);
      plots.push_back({png, body + "\n"});
    }
  }
  const fs::path fit = dir / "fit.csv";
  if (fs::exists(fit)) {
    const std::vector<std::string> header = csv_header(fit);
    const int x = column_number(fit, header, "x"), y = column_number(fit, header, "y"),
              prediction = column_number(fit, header, "prediction");
    plots.push_back(
        {"fit.png", fmt::format("set xlabel 'x'\nset ylabel 'y'\nset title 'lmtrain: "
                                "fit over the training data'\nplot {0} using {1}:{2} skip "
                                "1 with points pt 7 ps 0.3 title 'data', {0} using {1}:{3} skip 1 "
                                "with lines lw 2 title 'model'\n",
                                quoted(fit), x, y, prediction)});
  }
  const fs::path confusion = dir / "confusion.csv";
  if (fs::exists(confusion))
    plots.push_back(
        {"confusion.png",
         fmt::format(
             "set title 'lmtrain: confusion matrix (rows: true, columns: predicted)'\n"
             "set xlabel 'predicted class'\nset ylabel 'true class'\nunset key\nunset grid\n"
             "set xtics 1\nset ytics 1\nset yrange [] reverse\nset palette defined (0 'white', 1 "
             "'#2060a0')\n"
             "plot {0} matrix with image, {0} matrix using 1:2:(sprintf('%d',$3)) with labels\n",
             quoted(confusion))});
  return plots;
}

std::vector<std::string> make_plots(const std::string& run_dir, std::string* warning) {
  const fs::path dir(run_dir);
  const std::string term =
      "set terminal pngcairo size 900,560 enhanced font 'sans,11'\n"
      "set datafile separator ','\nset key top right\nset grid\n";
  std::vector<PlotScript> plots;
  try {
    plots = plot_scripts(run_dir);
  } catch (const InvalidArgument& e) {
    if (warning) *warning = fmt::format("plots skipped: {}", e.what());
    return {};
  }
  std::vector<std::string> made;
  for (const auto& [png, body] : plots) {
    const fs::path target = dir / png, temp = dir / (std::string(".") + png + ".tmp");
    std::string why;
    if (!run_gnuplot(term + fmt::format("set output {}\n", quoted(temp)) + body, dir, &why)) {
      std::error_code ec;
      fs::remove(temp, ec);
      if (warning) *warning = why;
      return made;
    }
    fs::rename(temp, target);
    made.push_back(target.string());
  }
  return made;
}

}  // namespace lmtrain::cli
