// Reading FANN training files (the text format of the Fast Artificial Neural Network library,
// fann_read_train_from_file), in which the classic benchmark sets of libfann-doc are stored.
#pragma once

#include <string>
#include <string_view>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

struct FannOptions {
  // NaN and ±Inf values are errors unless allowed here (see CsvOptions::allow_non_finite).
  bool allow_non_finite = false;
};

// A FANN file's samples, split as the file splits them (FANN's struct fann_train_data).
struct FannTrainData {
  NumericTable inputs;   // num_data × num_input
  NumericTable outputs;  // num_data × num_output
};

// Reads a FANN file, plain or gzip-compressed.  The first three numbers are
// "num_data num_input num_output"; then, for each sample, num_input inputs and num_output
// outputs.  The body is read as a stream of whitespace-separated numbers, so values may be
// spread over lines in any way (FANN writes inputs on one line and outputs on the next).
// Each row's source line is the line of its first value.
//
// Throws InvalidArgument naming the file and line for: an unreadable file, a header that is not
// three non-negative integers (num_data and num_input at least 1), a value that is not a number
// (quoted, with its sample and position), a non-finite value (unless allowed), and a body with
// fewer or more numbers than the header promises (with both counts).
FannTrainData read_fann(const std::string& path, const FannOptions& options = {});

// The same on text already in memory; `source` names it in messages and in the result.
FannTrainData parse_fann(std::string_view text, const std::string& source,
                         const FannOptions& options = {});

}  // namespace lmtrain::io
