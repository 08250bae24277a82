#include "plots.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lmtrain/io/atomic_write.h"

namespace lmtrain::cli {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) {
    if (c == '\'') s += "''";
    else s += c;
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

bool has_column_with_values(const fs::path& csv, int column) {
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  while (std::getline(in, line)) {
    int c = 0;
    std::size_t start = 0;
    for (;;) {
      const auto comma = line.find(',', start);
      if (c == column) {
        const std::string cell = line.substr(start, comma == std::string::npos ? comma : comma - start);
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

std::vector<std::string> make_plots(const std::string& run_dir, std::string* warning) {
  const fs::path dir(run_dir);
  std::vector<std::pair<std::string, std::string>> plots;  // png, script body
  const std::string term = "set terminal pngcairo size 900,560 enhanced font 'sans,11'\n"
                           "set datafile separator ','\nset key top right\nset grid\n";
  const fs::path epochs = dir / "epochs.csv";
  if (fs::exists(epochs)) {
    const bool validation = has_column_with_values(epochs, 2);
    for (const auto& [png, column, label] :
         {std::tuple{"loss_epoch.png", 1, "epoch"}, std::tuple{"loss_time.png", 9, "wall-clock seconds"}}) {
      std::string body = fmt::format(
          "set logscale y\nset format y '%.0e'\nset xlabel '{}'\nset ylabel 'loss'\n"
          "set title 'lmtrain: loss against {}'\n"
          "plot {} using {}:2 skip 1 with linespoints lw 2 pt 7 ps 0.5 title 'training'",
          label, label, quoted(epochs), column);
      if (validation)
        body += fmt::format(", {} using {}:3 skip 1 with linespoints lw 2 pt 5 ps 0.5 title 'validation'",
                            quoted(epochs), column);
      plots.emplace_back(png, body + "\n");
    }
  }
  const fs::path fit = dir / "fit.csv";
  if (fs::exists(fit))
    plots.emplace_back("fit.png", fmt::format("set xlabel 'x'\nset ylabel 'y'\nset title 'lmtrain: "
                                              "fit over the training data'\nplot {0} using 1:2 skip "
                                              "1 with points pt 7 ps 0.3 title 'data', {0} using 1:3 "
                                              "skip 1 with lines lw 2 title 'model'\n",
                                              quoted(fit)));
  const fs::path confusion = dir / "confusion.csv";
  if (fs::exists(confusion))
    plots.emplace_back(
        "confusion.png",
        fmt::format("set title 'lmtrain: confusion matrix (rows: true, columns: predicted)'\n"
                    "set xlabel 'predicted class'\nset ylabel 'true class'\nunset key\nunset grid\n"
                    "set xtics 1\nset ytics 1\nset yrange [] reverse\nset palette defined (0 'white', 1 '#2060a0')\n"
                    "plot {0} matrix with image, {0} matrix using 1:2:(sprintf('%d',$3)) with labels\n",
                    quoted(confusion)));

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
