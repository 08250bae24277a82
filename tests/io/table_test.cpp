// Reading labeled tables and telling formats from names (io/table.h), and the one
// standardization (io/standardization.h), against values computed here independently.
#include "lmtrain/io/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lmtrain/io/npy_writer.h"
#include "lmtrain/io/standardization.h"
#include "scratch_dir.h"

namespace lmtrain::io::testing {
namespace {

TEST(DataFormat, FromTheNameCaseInsensitivelyAndThroughGzip) {
  EXPECT_EQ(detect_data_format("runs/a.csv"), DataFormat::kCsv);
  EXPECT_EQ(detect_data_format("A.TSV"), DataFormat::kCsv);
  EXPECT_EQ(detect_data_format("notes.txt.gz"), DataFormat::kCsv);
  EXPECT_EQ(detect_data_format("X.NPY"), DataFormat::kNpy);
  EXPECT_EQ(detect_data_format("train-images-idx3-ubyte.gz"), DataFormat::kIdx);
  EXPECT_EQ(detect_data_format("images.IDX"), DataFormat::kIdx);
  EXPECT_EQ(detect_data_format("kin32fm.train"), DataFormat::kFann);
  EXPECT_EQ(detect_data_format("abelone.Data.gz"), DataFormat::kFann);
  EXPECT_EQ(detect_data_format("model.bin"), std::nullopt);
  EXPECT_EQ(parse_data_format("fann"), DataFormat::kFann);
  EXPECT_EQ(parse_data_format("CSV"), std::nullopt);
}

class TableTest : public ScratchDir {};

TEST_F(TableTest, CsvColumnsByNameAndIndexRowsAndOneHotLabels) {
  const std::string p = write("d.TSV", "a\tlabel\tb\n1\t2\t3\n4\t0\t6\n7\t1\t9\n");
  TableSource s;
  s.path = p;
  s.delimiter = '\t';
  s.inputs = {"b", "0"};
  s.targets = {"label"};
  s.rows = 2;
  const LabeledTable t = read_labeled_table(s, /*classification=*/true, /*classes=*/3);
  ASSERT_EQ(t.inputs.rows, 2u);
  EXPECT_EQ(t.inputs.values, (std::vector<double>{3, 1, 6, 4}));
  EXPECT_EQ(t.targets.cols, 3u);
  EXPECT_EQ(t.targets.values, (std::vector<double>{0, 0, 1, 1, 0, 0}));
  // Inputs alone: with no columns named and one column more than the model takes, the first.
  TableSource in;
  in.path = write("x.csv", "p,q,y\n1,2,3\n4,5,6\n");
  EXPECT_EQ(read_input_table(in, 2).values, (std::vector<double>{1, 2, 4, 5}));
  expect_contains(invalid_argument_message([&] { read_input_table(in, 4); }),
                  {"x.csv has 3 input columns but the model takes 4", "--columns"});
}

TEST_F(TableTest, TextClassLabelsAreOneHotRowsOfTheSortedNames) {
  TableSource s;
  s.path =
      write("iris.csv", "a,b,species\n1,2,virginica\n3,4,setosa\n5,6,versicolor\n7,8,setosa\n");
  const LabeledTable t = read_labeled_table(s, /*classification=*/true);
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(t.inputs.values, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(t.targets.values, (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(select_rows(t, std::vector<std::size_t>{2}, "x").class_names, t.class_names);
  // A second file's labels name the first's classes, in the first's order, even if it lacks one.
  TableSource v;
  v.path = write("v.csv", "a,b,species\n1,1,virginica\n2,2,versicolor\n");
  const LabeledTable vt = read_labeled_table(v, true, 3, &t.class_names);
  EXPECT_EQ(vt.targets.values, (std::vector<double>{0, 0, 1, 0, 1, 0}));
  EXPECT_EQ(vt.class_names, t.class_names);
  expect_contains(invalid_argument_message([&] { read_labeled_table(s, true, 4); }),
                  {"iris.csv: 4 classes are expected but the labels name 3 (setosa, versicolor, "
                   "virginica)"});
}

// Sample weights: a CSV column by name or index, left out of the default inputs and carried by
// the row cap and select_rows; or an NPY file of one value per row; bad values and misplaced
// settings named.
TEST_F(TableTest, SampleWeightsFromAColumnOrAnNpyFile) {
  TableSource s;
  s.what = "data.train";
  s.path = write("w.csv", "a,w,b,y\n1,2,3,4\n5,0.5,7,8\n9,0,11,12\n13,1,15,16\n");
  s.weights = "w";
  s.rows = 3;
  LabeledTable t = read_labeled_table(s, false);
  ASSERT_TRUE(t.weighted());
  EXPECT_EQ(t.inputs.values, (std::vector<double>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(t.targets.values, (std::vector<double>{4, 8, 12}));
  EXPECT_EQ(t.weights.values, (std::vector<double>{2, 0.5, 0}));
  EXPECT_EQ(select_rows(t, std::vector<std::size_t>{2, 0}, "x").weights.values,
            (std::vector<double>{0, 2}));
  s.weights = "1";  // by index
  s.rows = 0;
  EXPECT_EQ(read_labeled_table(s, false).weights.values, (std::vector<double>{2, 0.5, 0, 1}));
  s.weights = "y";
  expect_contains(invalid_argument_message([&] { read_labeled_table(s, false); }),
                  {"data.train.weights = \"y\" is a target column"});
  s.weights = "";
  EXPECT_FALSE(read_labeled_table(s, false).weighted());
  EXPECT_EQ(read_labeled_table(s, false).inputs.cols, 3u);  // w is an input when not named

  TableSource n;
  n.what = "data.train";
  n.path = write("n.csv", "a,y\n1,2\n3,4\n5,6\n");
  n.weights_path = path("w.npy");
  const std::vector<double> w = {1, 3, 0.25};
  const std::vector<std::size_t> three = {3}, two = {2};
  write_npy<double>(n.weights_path, std::span<const double>(w), three);
  EXPECT_EQ(read_labeled_table(n, false).weights.values, w);
  const std::vector<double> negative = {1, -2, 0};
  write_npy<double>(n.weights_path, std::span<const double>(negative), three);
  expect_contains(invalid_argument_message([&] { read_labeled_table(n, false); }),
                  {"data.train: ", "w.npy row 1", "sample weight -2", "finite and ≥ 0"});
  const std::vector<double> zeros = {0, 0, 0};
  write_npy<double>(n.weights_path, std::span<const double>(zeros), three);
  expect_contains(invalid_argument_message([&] { read_labeled_table(n, false); }),
                  {"every sample weight of", "n.csv is 0"});
  write_npy<double>(n.weights_path, std::span<const double>(w).first(2), two);
  expect_contains(invalid_argument_message([&] { read_labeled_table(n, false); }),
                  {"data.train.weights_path = ", "one weight per row of", "(3 rows)"});
  n.weights = "a";
  expect_contains(invalid_argument_message([&] { read_labeled_table(n, false); }),
                  {"both weights (a column) and weights_path are set"});
}

TEST_F(TableTest, UnknownFormatAndMissingFileAreClearErrors) {
  TableSource s;
  s.what = "data.train";
  s.path = write("data.bin", "1,2\n");
  expect_contains(invalid_argument_message([&] { read_labeled_table(s, false); }),
                  {"data.train.path = ", "cannot tell the format", "set data.train.format"});
  s.path = path("missing.csv");
  expect_contains(invalid_argument_message([&] { read_labeled_table(s, false); }),
                  {"data.train.path", "missing.csv: no such file"});
}

TEST(Standardization, PopulationStatisticsRoundTripAndConstantColumns) {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal(3.0, 2.0);
  std::vector<double> v(300);  // 100 rows × 3 columns; column 2 constant
  for (std::size_t r = 0; r < 100; ++r) {
    v[3 * r] = normal(rng);
    v[3 * r + 1] = 1e6 + 1e-3 * normal(rng);
    v[3 * r + 2] = 5.0;
  }
  const Standardization s = Standardization::fit(std::span<const double>(v), 3);
  for (std::size_t c = 0; c < 2; ++c) {  // the two-pass mean and population variance, here
    double mean = 0, var = 0;
    for (std::size_t r = 0; r < 100; ++r) mean += v[3 * r + c] / 100;
    for (std::size_t r = 0; r < 100; ++r)
      var += (v[3 * r + c] - mean) * (v[3 * r + c] - mean) / 100;
    EXPECT_NEAR(s.mean[c], mean, 1e-12 * std::abs(mean));
    EXPECT_NEAR(s.scale[c], std::sqrt(var), 1e-9 * std::sqrt(var));
  }
  EXPECT_EQ(s.mean[2], 5.0);
  EXPECT_EQ(s.scale[2], 1.0);  // only centred
  std::vector<float> f(v.begin(), v.end());
  s.apply(std::span<float>(f));
  double sum = 0;
  for (std::size_t r = 0; r < 100; ++r) sum += f[3 * r];
  EXPECT_NEAR(sum / 100, 0.0, 1e-6);
  EXPECT_EQ(f[2], 0.0f);
  std::vector<double> back = v;
  s.apply(std::span<double>(back));
  s.invert(std::span<double>(back));
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], 1e-9 * std::abs(v[i]));
}

}  // namespace
}  // namespace lmtrain::io::testing
