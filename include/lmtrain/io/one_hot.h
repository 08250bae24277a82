// Class labels (a column of class indices 0..C−1, as IDX label files and CSV label columns hold
// them) → one-hot target rows for the cross-entropy loss.
#pragma once

#include <cstddef>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

// The number of classes the labels imply: the largest label + 1.  Validates the labels as
// one_hot does.
std::size_t count_classes(const NumericTable& labels);

// An n × num_classes table whose row r is 1 at column labels(r, 0) and 0 elsewhere; column names
// "class_0" … and the labels' source and source lines are carried over, so that later errors
// still point at the label file.
//
// Throws InvalidArgument for labels that are not one column, num_classes = 0, and a label that is
// not an integer in [0, num_classes) — naming its row (NumericTable::row_location: file and line,
// or file and row) and its value.
NumericTable one_hot(const NumericTable& labels, std::size_t num_classes);

}  // namespace lmtrain::io
