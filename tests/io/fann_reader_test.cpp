#include "lmtrain/io/fann_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

#include "scratch_dir.h"

namespace lmtrain::io {
namespace {

using testing::expect_contains;
using testing::invalid_argument_message;
using testing::random_value;

class FannReaderTest : public testing::ScratchDir {};

struct FannFixture {
  std::vector<double> inputs, outputs;
  std::vector<std::size_t> input_lines, output_lines;
  std::string text;
};

// A random FANN file written by the test: the header, then every number followed by a random
// separator (space, tab or newline), so samples start and end anywhere on a line.
FannFixture make_fann(std::mt19937_64& rng, std::size_t n, std::size_t in, std::size_t out) {
  FannFixture f;
  std::ostringstream s;
  s << std::setprecision(17) << n << ' ' << in << ' ' << out << '\n';
  std::size_t line = 2;
  std::uniform_int_distribution<int> separator(0, 5);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < in + out; ++k) {
      const double v = random_value(rng);
      if (k == 0) f.input_lines.push_back(line);
      if (k == in) f.output_lines.push_back(line);
      (k < in ? f.inputs : f.outputs).push_back(v);
      if (v > 0 && separator(rng) == 0) s << '+';
      s << v;
      switch (separator(rng)) {
        case 0:
          s << "\r\n";
          ++line;
          break;
        case 1:
          s << "\n\n";
          line += 2;
          break;
        case 2:
          s << '\t';
          break;
        default:
          s << ' ';
      }
    }
  }
  f.text = s.str();
  return f;
}

void expect_fann_equals(const FannTrainData& d, const FannFixture& f, std::size_t n, std::size_t in,
                        std::size_t out, const std::string& p) {
  EXPECT_EQ(d.inputs.rows, n);
  EXPECT_EQ(d.inputs.cols, in);
  EXPECT_EQ(d.outputs.rows, n);
  EXPECT_EQ(d.outputs.cols, out);
  EXPECT_EQ(d.inputs.values, f.inputs);
  EXPECT_EQ(d.outputs.values, f.outputs);
  EXPECT_EQ(d.inputs.source_lines, f.input_lines);
  EXPECT_EQ(d.outputs.source_lines, f.output_lines);
  EXPECT_EQ(d.inputs.source, p);
}

TEST_F(FannReaderTest, RandomSamplesSpreadOverLinesRoundTripExactly) {
  std::mt19937_64 rng(2718);
  const FannFixture f = make_fann(rng, 83, 7, 3);
  const std::string p = write("random.train", f.text);
  expect_fann_equals(read_fann(p), f, 83, 7, 3, p);
  const std::string g = write_gzip("random.train.gz", f.text);
  expect_fann_equals(read_fann(g), f, 83, 7, 3, g);
}

TEST_F(FannReaderTest, TooFewNumbersGiveBothCounts) {
  std::mt19937_64 rng(1);
  const FannFixture f = make_fann(rng, 10, 4, 2);
  std::string text = f.text;
  // Drop the last three numbers: sample 9 keeps 3 of its 6 values.
  for (int k = 0; k < 3; ++k) {
    text.erase(text.find_last_not_of(" \t\r\n") + 1);
    text.erase(text.find_last_of(" \t\r\n") + 1);
  }
  const std::string p = write("short.train", text);
  expect_contains(
      invalid_argument_message([&] { read_fann(p); }),
      {p + ":", "ends after 57 numbers", "promises 10 samples × (4 inputs + 2 outputs) = 60",
       "sample 9 (0-based) is incomplete (3 of 6 values)"});
}

TEST_F(FannReaderTest, TooManyNumbersGiveBothCountsAndTheFirstExtra) {
  const std::string p = write("long.train", "2 2 1\n1 2\n3\n4 5\n6\n7\n8 9\n");
  expect_contains(invalid_argument_message([&] { read_fann(p); }),
                  {p + ":6", "holds 9 numbers after the header, 3 more than", "= 6 numbers",
                   "first extra value is \"7\" on line 6"});
}

TEST_F(FannReaderTest, BadValuesAndHeadersNameTheLine) {
  const std::string p = write("text.train", "2 2 1\n1 2\n3\n4 oops\n6\n");
  expect_contains(
      invalid_argument_message([&] { read_fann(p); }),
      {p + ":4", "line 4", "input 2 of 2 of sample 1", "\"oops\"", "expected a number"});
  const std::string q = write("nan.train", "1 1 1\n0.5\nnan\n");
  expect_contains(invalid_argument_message([&] { read_fann(q); }),
                  {q + ":3", "output 1 of 1 of sample 0", "\"nan\"", "not finite"});
  FannOptions allow;
  allow.allow_non_finite = true;
  EXPECT_TRUE(std::isnan(read_fann(q, allow).outputs.values[0]));
  const std::string r = write("header.train", "100 2.5 1\n");
  expect_contains(
      invalid_argument_message([&] { read_fann(r); }),
      {r + ":1", "num_input", "\"2.5\"", "non-negative integer", "num_data num_input num_output"});
  const std::string s = write("no_header.train", "\n\n 5 ");
  expect_contains(invalid_argument_message([&] { read_fann(s); }),
                  {s + ":3", "ends before num_input"});
  const std::string t = write("zero.train", "0 3 1\n");
  expect_contains(invalid_argument_message([&] { read_fann(t); }), {t + ":1", "no samples"});
  // Found by fuzzing: num_input + num_output overflowing, and a huge num_output.
  const std::string u = write("overflow.train", "4\n1 0018446744073709551615\n1\n");
  expect_contains(invalid_argument_message([&] { read_fann(u); }), {u + ":1", "too large"});
  const std::string v = write("huge.train", "2 2 18888888888\n1 2\n");
  expect_contains(invalid_argument_message([&] { read_fann(v); }),
                  {v + ":", "ends after 2 numbers", "sample 0 (0-based) is incomplete"});
  const std::string missing = path("missing.train");
  expect_contains(invalid_argument_message([&] { read_fann(missing); }),
                  {missing, "No such file or directory"});
}

// A real FANN benchmark set from Debian's libfann-doc (DESIGN.md §8), checked against an
// independent parse with iostreams.
TEST(FannRealData, Kin32fmMatchesAnIostreamParse) {
  std::string p = "/usr/share/doc/libfann-dev/examples/datasets/kin32fm.train";
  if (!std::filesystem::exists(p) && std::filesystem::exists(p + ".gz")) p += ".gz";
  if (!std::filesystem::exists(p))
    GTEST_SKIP() << "libfann-doc is not installed (apt-get install libfann-doc)";
  const FannTrainData d = read_fann(p);
  EXPECT_EQ(d.inputs.rows, 2048u);
  EXPECT_EQ(d.inputs.cols, 32u);
  EXPECT_EQ(d.outputs.cols, 1u);
  EXPECT_EQ(d.inputs.source_lines.front(), 2u);
  EXPECT_EQ(d.outputs.source_lines.front(), 3u);
  EXPECT_EQ(d.outputs.source_lines.back(), 4097u);
  if (p.ends_with(".gz")) return;  // the iostream reference reads plain text only
  std::ifstream in(p);
  std::size_t n = 0, ni = 0, no = 0;
  in >> n >> ni >> no;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < ni; ++k) {
      double v = 0.0;
      in >> v;
      ASSERT_EQ(d.inputs(i, k), v) << "sample " << i << " input " << k;
    }
    for (std::size_t k = 0; k < no; ++k) {
      double v = 0.0;
      in >> v;
      ASSERT_EQ(d.outputs(i, k), v) << "sample " << i << " output " << k;
    }
  }
  double extra = 0.0;
  EXPECT_FALSE(in >> extra);
}

// Every train/test file of libfann-doc reads, with as many rows as its header line says.
TEST(FannRealData, EveryLibfannBenchmarkSetReads) {
  const std::filesystem::path dir = "/usr/share/doc/libfann-dev/examples/datasets";
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "libfann-doc is not installed (apt-get install libfann-doc)";
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".train") == std::string::npos && name.find(".test") == std::string::npos)
      continue;
    SCOPED_TRACE(name);
    const FannTrainData d = read_fann(entry.path().string());
    std::size_t n = 0, in = 0, out = 0;
    if (!name.ends_with(".gz")) {
      std::ifstream header(entry.path());
      header >> n >> in >> out;
      EXPECT_EQ(d.inputs.rows, n);
      EXPECT_EQ(d.inputs.cols, in);
      EXPECT_EQ(d.outputs.cols, out);
    }
    EXPECT_GT(d.inputs.rows, 0u);
    ++files;
  }
  EXPECT_GE(files, 2u);
}

}  // namespace
}  // namespace lmtrain::io
