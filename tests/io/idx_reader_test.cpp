#include "lmtrain/io/idx_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

#include "scratch_dir.h"

namespace lmtrain::io {
namespace {

using testing::expect_contains;
using testing::invalid_argument_message;
using testing::random_value;

class IdxReaderTest : public testing::ScratchDir {};

// IDX bytes built by hand: 00 00 <type> <ndims>, big-endian uint32 dimensions, then values with
// their bytes reversed into big-endian order by the test's own shifts.
template <typename T>
std::string idx_file(unsigned char type_code, const std::vector<std::uint32_t>& dims,
                     const std::vector<T>& values) {
  std::string out = {'\0', '\0', static_cast<char>(type_code), static_cast<char>(dims.size())};
  const auto put_big_endian = [&out](std::uint64_t bits, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  };
  for (std::uint32_t d : dims) put_big_endian(d, 4);
  for (T v : values) {
    if constexpr (sizeof(T) == 1) {
      out.push_back(static_cast<char>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
      put_big_endian(std::bit_cast<U>(v), sizeof(T));
    } else {
      put_big_endian(static_cast<std::make_unsigned_t<T>>(v), sizeof(T));
    }
  }
  return out;
}

template <typename T>
std::vector<T> random_values(std::mt19937_64& rng, std::size_t n) {
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(random_value(rng));
    } else {
      std::uniform_int_distribution<long long> any(std::numeric_limits<T>::min(),
                                                   std::numeric_limits<T>::max());
      x = static_cast<T>(any(rng));
    }
  }
  return v;
}

template <typename T>
void check_type(IdxReaderTest& test, unsigned char code, std::uint64_t seed) {
  SCOPED_TRACE(static_cast<int>(code));
  std::mt19937_64 rng(seed);
  const std::vector<T> values = random_values<T>(rng, 11 * 6 * 5);
  const std::string bytes = idx_file<T>(code, {11, 6, 5}, values);
  for (bool gzip : {false, true}) {
    const std::string p =
        gzip ? test.write_gzip("images.idx.gz", bytes) : test.write("images.idx", bytes);
    const NumericTable t = read_idx(p);
    ASSERT_EQ(t.rows, 11u);
    ASSERT_EQ(t.cols, 30u);
    EXPECT_EQ(t.shape, (std::vector<std::size_t>{11, 6, 5}));
    EXPECT_EQ(t.source, p);
    ASSERT_EQ(t.values.size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(t.values[i], static_cast<double>(values[i])) << "element " << i;
  }
}

TEST_F(IdxReaderTest, EveryTypeCodeRoundTripsExactlyPlainAndGzipped) {
  check_type<std::uint8_t>(*this, 0x08, 1);
  check_type<std::int8_t>(*this, 0x09, 2);
  check_type<std::int16_t>(*this, 0x0B, 3);
  check_type<std::int32_t>(*this, 0x0C, 4);
  check_type<float>(*this, 0x0D, 5);
  check_type<double>(*this, 0x0E, 6);
}

TEST_F(IdxReaderTest, LabelsAreOneColumnAndFourDimensionsFlatten) {
  std::mt19937_64 rng(77);
  std::vector<std::uint8_t> labels(257);
  for (auto& l : labels) l = static_cast<std::uint8_t>(rng() % 10);
  const NumericTable t = read_idx(write("labels.idx", idx_file<std::uint8_t>(0x08, {257}, labels)));
  EXPECT_EQ(t.rows, 257u);
  EXPECT_EQ(t.cols, 1u);
  for (std::size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(t.values[i], labels[i]);

  const std::vector<float> v = random_values<float>(rng, 3 * 2 * 4 * 5);
  const NumericTable u = read_idx(write("4d.idx", idx_file<float>(0x0D, {3, 2, 4, 5}, v)));
  EXPECT_EQ(u.rows, 3u);
  EXPECT_EQ(u.cols, 40u);
  EXPECT_EQ(u(2, 1 * 20 + 3 * 5 + 4), static_cast<double>(v[2 * 40 + 1 * 20 + 3 * 5 + 4]));
}

TEST_F(IdxReaderTest, WrongMagicAndTypeCodeAreRejected) {
  const std::string p = write("text.idx", "P5\n28 28\n255\n");
  expect_contains(invalid_argument_message([&] { read_idx(p); }),
                  {p, "not an IDX file", "two zero bytes", "50 35 0a 32"});
  const std::string q = write("code.idx", std::string("\0\0\x0A\x01\0\0\0\x01x", 9));
  expect_contains(invalid_argument_message([&] { read_idx(q); }),
                  {q, "unknown IDX type code 0x0a"});
  const std::string r = write("zero.idx", std::string("\0\0\x08\x00", 4));
  expect_contains(invalid_argument_message([&] { read_idx(r); }), {r, "0 dimensions"});
  const std::string s = write("short.idx", std::string("\0\0", 2));
  expect_contains(invalid_argument_message([&] { read_idx(s); }), {s, "truncated"});
}

TEST_F(IdxReaderTest, TruncatedOrOverlongDataIsRejectedWithSizes) {
  std::mt19937_64 rng(9);
  const std::string full =
      idx_file<std::uint8_t>(0x08, {10, 4, 4}, random_values<std::uint8_t>(rng, 160));
  const std::string p = write("cut.idx", full.substr(0, full.size() - 7));
  expect_contains(
      invalid_argument_message([&] { read_idx(p); }),
      {p, "truncated IDX file", "10 × 4 × 4", "need 160 bytes", "holds 153", "16-byte header"});
  const std::string q = write("long.idx", full + "xx");
  expect_contains(invalid_argument_message([&] { read_idx(q); }),
                  {q, "size mismatch", "need 160 bytes", "holds 162", "disagree"});
  const std::string r = write("cut_header.idx", full.substr(0, 10));
  expect_contains(invalid_argument_message([&] { read_idx(r); }),
                  {r, "truncated", "16-byte header"});
  const std::string empty = write("empty.idx", idx_file<std::uint8_t>(0x08, {0, 28, 28}, {}));
  expect_contains(invalid_argument_message([&] { read_idx(empty); }), {empty, "no values"});
}

TEST_F(IdxReaderTest, TruncatedGzipStreamIsReported) {
  std::mt19937_64 rng(10);
  const std::string bytes = idx_file<float>(0x0D, {500, 8}, random_values<float>(rng, 4000));
  const std::string whole = write_gzip("whole.idx.gz", bytes);
  const std::string compressed = read_all(whole);
  const std::string p = write("cut.idx.gz", compressed.substr(0, compressed.size() / 2));
  expect_contains(invalid_argument_message([&] { read_idx(p); }), {p, "gzip", "incomplete"});
}

// Fashion-MNIST as installed by Debian's dataset-fashion-mnist (DESIGN.md §8).
TEST(IdxRealData, FashionMnistTrainingSetHas60000BalancedImages) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  const std::string images_path = dir + "train-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "train-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(images_path) || !std::filesystem::exists(labels_path))
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  const NumericTable images = read_idx(images_path);
  EXPECT_EQ(images.rows, 60000u);
  EXPECT_EQ(images.cols, 784u);
  EXPECT_EQ(images.shape, (std::vector<std::size_t>{60000, 28, 28}));
  double lo = 255.0, hi = 0.0;
  for (double v : images.values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0);
  EXPECT_EQ(hi, 255.0);  // raw bytes, not scaled

  const NumericTable labels = read_idx(labels_path);
  ASSERT_EQ(labels.rows, 60000u);
  ASSERT_EQ(labels.cols, 1u);
  std::array<std::size_t, 10> counts{};
  for (double v : labels.values) {
    ASSERT_GE(v, 0.0);
    ASSERT_LE(v, 9.0);
    ASSERT_EQ(v, std::floor(v));
    ++counts[static_cast<std::size_t>(v)];
  }
  for (std::size_t c = 0; c < 10; ++c) EXPECT_EQ(counts[c], 6000u) << "class " << c;
}

}  // namespace
}  // namespace lmtrain::io
