// PNG plots of a run directory through gnuplot (installed by scripts/install-deps.sh):
//   loss_epoch.png  training (and validation) loss against epoch, log scale   (epochs.csv)
//   loss_time.png   the same against wall-clock seconds                        (epochs.csv)
//   fit.png         1-D regression: data and the model's curve                  (fit.csv)
//   confusion.png   classification: the test (or training) confusion matrix     (confusion.csv)
// Each PNG is written to a temporary name and renamed, so a plot is whole or absent.  Columns are
// found by their header names, never by position.
#pragma once

#include <string>
#include <vector>

namespace lmtrain::cli {

// One PNG's gnuplot commands (without the terminal and output lines).
struct PlotScript {
  std::string png;
  std::string body;
};
// The plots the CSV files of `run_dir` allow.  Throws InvalidArgument when a file lacks a column
// a plot needs.
std::vector<PlotScript> plot_scripts(const std::string& run_dir);

// Returns the PNGs made; when gnuplot is missing or fails, returns none and sets `warning`.
std::vector<std::string> make_plots(const std::string& run_dir, std::string* warning);

}  // namespace lmtrain::cli
