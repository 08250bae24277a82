// Held-out rows carved out of one training table by a seeded permutation: `lmtrain fit`'s
// data.validation_fraction and data.test_fraction, and the Python package's validation_fraction.
// The one definition, so that the same seed holds out the same rows in every front end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lmtrain::io {

struct RowSplit {
  std::vector<std::size_t> validation;  // in permutation order
  std::vector<std::size_t> test;        // in permutation order
  std::vector<std::size_t> train;       // the remaining rows, ascending (the file's order)
};

// Shuffles 0..rows−1 with Rng(seed ^ 0x5eed5711); the first ⌊validation_fraction·rows⌋ rows of
// the permutation are the validation rows, the next ⌊test_fraction·rows⌋ the test rows.  Throws
// InvalidArgument when a fraction is outside [0, 1) or when no training row would remain.
RowSplit split_rows(std::size_t rows, double validation_fraction, double test_fraction,
                    std::uint64_t seed);

}  // namespace lmtrain::io
