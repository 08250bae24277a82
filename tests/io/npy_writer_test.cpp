#include "lmtrain/io/npy_writer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <vector>

#include "lmtrain/io/atomic_write.h"
#include "lmtrain/io/npy_reader.h"
#include "scratch_dir.h"

namespace lmtrain::io {
namespace {

using testing::expect_contains;
using testing::random_value;

static_assert(std::endian::native == std::endian::little,
              "the expected bytes are built with memcpy in host byte order");

class NpyWriterTest : public testing::ScratchDir {};

TEST_F(NpyWriterTest, BytesMatchTheFormatSpecification) {
  const std::vector<double> values = {1.5, -2.0, 3.25, 1e-300, -7.0, 8.125};
  const std::size_t shape[] = {2, 3};
  const std::string bytes = encode_npy<double>(values, shape);

  // Expected: magic, version 1.0, header length, numpy's own dictionary text (59 characters)
  // padded with spaces and '\n' so that the data starts at byte 128, a multiple of 64.
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  const std::size_t header_length = 128 - 10;
  dict.append(header_length - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string expected("\x93NUMPY\x01\x00", 8);
  expected.push_back(static_cast<char>(header_length));
  expected.push_back('\0');
  expected += dict;
  std::string raw(values.size() * 8, '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  expected += raw;
  EXPECT_EQ(bytes, expected);

  const float one[] = {0.5f};
  const std::size_t vector_shape[] = {1};
  const std::string f = encode_npy<float>(one, vector_shape);
  EXPECT_NE(f.find("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"), std::string::npos);
  EXPECT_EQ(f.size(), 128u + 4u);
}

TEST_F(NpyWriterTest, RandomDoubleAndFloatArraysRoundTripExactly) {
  std::mt19937_64 rng(31337);
  std::vector<double> d(61 * 9);
  for (double& v : d) v = random_value(rng);
  const std::size_t shape[] = {61, 9};
  const std::string p = path("pred.npy");
  write_npy<double>(p, d, shape);
  const NumericTable t = read_npy(p);
  EXPECT_EQ(t.rows, 61u);
  EXPECT_EQ(t.cols, 9u);
  EXPECT_EQ(t.values, d);
  const std::string bytes = read_all(p);
  EXPECT_EQ((bytes.size() - d.size() * 8) % 64, 0u) << "data must start 64-byte aligned";

  std::vector<float> f(4 * 5 * 6);
  for (float& v : f) v = static_cast<float>(random_value(rng));
  const std::size_t shape3[] = {4, 5, 6};
  write_npy<float>(p, f, shape3);  // overwrites the double file
  const NumericTable g = read_npy(p);
  EXPECT_EQ(g.shape, (std::vector<std::size_t>{4, 5, 6}));
  ASSERT_EQ(g.values.size(), f.size());
  for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(g.values[i], static_cast<double>(f[i]));

  NumericTable table;
  table.rows = 3;
  table.cols = 2;
  table.values = {random_value(rng), random_value(rng), random_value(rng),
                  random_value(rng), random_value(rng), random_value(rng)};
  write_npy(path("table.npy"), table);
  EXPECT_EQ(read_npy(path("table.npy")).values, table.values);

  // Atomic writes leave no temporary files behind.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir())) {
    ++files;
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
  EXPECT_EQ(files, 2u);
}

TEST_F(NpyWriterTest, LargeShapesSwitchToFormatVersion2) {
  // A 25 000-dimensional shape makes the header longer than version 1.0's 65 535 bytes.
  std::vector<std::size_t> shape(25000, 1);
  shape[0] = 2;
  const std::vector<double> values = {1.25, -3.5};
  const std::string bytes = encode_npy<double>(values, shape);
  EXPECT_EQ(bytes[6], '\x02');
  const NumericTable t = parse_npy(bytes, "v2");
  EXPECT_EQ(t.rows, 2u);
  EXPECT_EQ(t.cols, 1u);
  EXPECT_EQ(t.values, values);
}

TEST_F(NpyWriterTest, ShapeMismatchAndUnwritablePathsAreErrors) {
  const std::vector<double> values(5, 1.0);
  const std::size_t shape[] = {2, 3};
  EXPECT_THROW(encode_npy<double>(values, shape), InvalidArgument);

  const std::string p = path("missing_dir/pred.npy");
  try {
    write_file_atomically(p, "bytes");
    ADD_FAILURE() << "expected lmtrain::Error";
  } catch (const lmtrain::Error& e) {
    expect_contains(e.what(), {p, "No such file or directory", "creating a temporary file"});
  }
  EXPECT_FALSE(std::filesystem::exists(p));
}

TEST_F(NpyWriterTest, NumpyLoadsWhatLmtrainWrites) {
  if (!testing::numpy_available()) GTEST_SKIP() << "python3 with numpy is not installed";
  std::mt19937_64 rng(8);
  std::vector<double> d(13 * 4);
  for (double& v : d) v = random_value(rng);
  const std::size_t shape[] = {13, 4};
  write_npy<double>(path("ours.npy"), d, shape);
  // The reference: the same values as raw little-endian float64 written by the test itself.
  std::string raw(d.size() * 8, '\0');
  std::memcpy(raw.data(), d.data(), raw.size());
  write("ours.f8", raw);
  const std::string command =
      "/usr/bin/python3 -c \"import sys, numpy as np; a = np.load(sys.argv[1]); "
      "b = np.fromfile(sys.argv[2], '<f8').reshape(13, 4); "
      "sys.exit(0 if a.dtype == np.float64 and a.shape == (13, 4) and (a == b).all() else 1)\" " +
      path("ours.npy") + " " + path("ours.f8");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
}  // namespace lmtrain::io
