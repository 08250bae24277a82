#include "lmtrain/io/one_hot.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "lmtrain/io/csv_reader.h"
#include "lmtrain/io/idx_reader.h"
#include "scratch_dir.h"

namespace lmtrain::io {
namespace {

using testing::expect_contains;
using testing::invalid_argument_message;

class OneHotTest : public testing::ScratchDir {};

TEST_F(OneHotTest, RandomLabelsBecomeOneHotRowsKeepingTheirSourceLines) {
  std::mt19937_64 rng(4);
  std::ostringstream csv;
  csv << "label\n";
  std::vector<std::size_t> labels;
  for (int r = 0; r < 300; ++r) {
    if (r % 7 == 3) csv << "# skipped\n";
    labels.push_back(rng() % 7);
    csv << labels.back() << '\n';
  }
  labels.push_back(6);  // make sure the largest class occurs
  csv << "6\n";
  const NumericTable table = read_csv(write("labels.csv", csv.str()));
  EXPECT_EQ(count_classes(table), 7u);
  const NumericTable hot = one_hot(table, 9);
  ASSERT_EQ(hot.rows, labels.size());
  ASSERT_EQ(hot.cols, 9u);
  EXPECT_EQ(hot.column_names.front(), "class_0");
  EXPECT_EQ(hot.source_lines, table.source_lines);
  for (std::size_t r = 0; r < hot.rows; ++r)
    for (std::size_t c = 0; c < 9; ++c)
      ASSERT_EQ(hot(r, c), c == labels[r] ? 1.0 : 0.0) << "row " << r << " column " << c;
}

TEST_F(OneHotTest, OutOfRangeLabelsNameTheirRow) {
  const std::string p = write("bad.csv", "y\n0\n1\n# c\n10\n");
  const NumericTable table = read_csv(p);
  expect_contains(invalid_argument_message([&] { one_hot(table, 10); }),
                  {p + ":5", "label 10 is not a class index in 0..9", "1-based labels?"});
  const std::string q = write("neg.csv", "y\n0\n-1\n");
  expect_contains(invalid_argument_message([&] { one_hot(read_csv(q), 3); }),
                  {q + ":3", "label -1"});
  const std::string r = write("frac.csv", "y\n2.5\n");
  expect_contains(invalid_argument_message([&] { count_classes(read_csv(r)); }),
                  {r + ":2", "label 2.5 is not a class index"});
  const std::string s = write("two.csv", "a,b\n1,2\n");
  expect_contains(invalid_argument_message([&] { one_hot(read_csv(s), 3); }),
                  {s, "one column", "2 columns"});

  // Binary label files have no lines: the row index names the label.
  const std::string idx =
      write("labels.idx", std::string("\0\0\x08\x01\0\0\0\x04\x01\x02\x0c\x03", 12));
  expect_contains(invalid_argument_message([&] { one_hot(read_idx(idx), 10); }),
                  {idx + " row 2", "label 12"});
}

}  // namespace
}  // namespace lmtrain::io
