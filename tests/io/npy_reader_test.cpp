#include "lmtrain/io/npy_reader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "scratch_dir.h"

namespace lmtrain::io {
namespace {

using testing::expect_contains;
using testing::invalid_argument_message;
using testing::random_value;

static_assert(std::endian::native == std::endian::little,
              "the hand-built fixtures memcpy values in host byte order");

class NpyReaderTest : public testing::ScratchDir {};

// An .npy file built by hand from the format description (numpy/lib/format.py): magic, version,
// little-endian header length, the dictionary padded with spaces to `align` bytes and ended by
// '\n', then the raw data.  Deliberately independent of lmtrain's writer.
std::string npy_file(const std::string& dict, std::string_view data, int major = 1,
                     std::size_t align = 64) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % align != 0) header.push_back(' ');
  header.push_back('\n');
  const auto length = static_cast<std::uint32_t>(header.size());
  for (std::size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>(length >> (8 * i)));
  return out + header + std::string(data);
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// Random values of type T over its whole range (floats: mixed magnitudes), their raw bytes, and
// the doubles they must read as.
template <typename T>
struct RandomArray {
  std::string bytes;
  std::vector<double> expected;
};

template <typename T>
RandomArray<T> random_array(std::mt19937_64& rng, std::size_t count) {
  RandomArray<T> a;
  for (std::size_t i = 0; i < count; ++i) {
    T v{};
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(random_value(rng));
    } else if constexpr (std::is_same_v<T, bool>) {
      v = (rng() & 1) != 0;
    } else {
      std::uniform_int_distribution<long long> any(
          static_cast<long long>(std::numeric_limits<T>::min()),
          static_cast<long long>(std::min<unsigned long long>(
              std::numeric_limits<T>::max(), std::numeric_limits<long long>::max())));
      v = static_cast<T>(any(rng));
    }
    char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    a.bytes.append(raw, sizeof(T));
    a.expected.push_back(static_cast<double>(v));
  }
  return a;
}

template <typename T>
void check_dtype(NpyReaderTest& test, const std::string& descr, std::uint64_t seed) {
  SCOPED_TRACE(descr);
  std::mt19937_64 rng(seed);
  const RandomArray<T> a = random_array<T>(rng, 23 * 7);
  int version = 1;
  for (std::size_t align : {64u, 16u}) {
    for (int major : {1, 2, 3}) {
      const std::string p = test.write(fmt::format("a{}.npy", ++version),
                                       npy_file(dict(descr, "(23, 7)"), a.bytes, major, align));
      const NumericTable table = read_npy(p);
      ASSERT_EQ(table.rows, 23u);
      ASSERT_EQ(table.cols, 7u);
      EXPECT_EQ(table.shape, (std::vector<std::size_t>{23, 7}));
      EXPECT_EQ(table.source, p);
      EXPECT_TRUE(table.source_lines.empty());
      ASSERT_EQ(table.values, a.expected);
    }
  }
}

TEST_F(NpyReaderTest, EverySupportedDtypeRoundTripsExactlyInEveryFormatVersion) {
  check_dtype<double>(*this, "<f8", 1);
  check_dtype<float>(*this, "<f4", 2);
  check_dtype<std::int8_t>(*this, "|i1", 3);
  check_dtype<std::int8_t>(*this, "<i1", 4);
  check_dtype<std::int16_t>(*this, "<i2", 5);
  check_dtype<std::int32_t>(*this, "<i4", 6);
  check_dtype<std::int64_t>(*this, "<i8", 7);
  check_dtype<std::uint8_t>(*this, "|u1", 8);
  check_dtype<std::uint8_t>(*this, "<u1", 9);
  check_dtype<std::uint16_t>(*this, "<u2", 10);
  check_dtype<std::uint32_t>(*this, "<u4", 11);
  check_dtype<std::uint64_t>(*this, "<u8", 12);
  check_dtype<bool>(*this, "|b1", 13);
}

TEST_F(NpyReaderTest, ShapesFlattenToRowsTimesTheRest) {
  std::mt19937_64 rng(42);
  const RandomArray<double> a = random_array<double>(rng, 5 * 3 * 4);
  {
    const NumericTable t = read_npy(write("n.npy", npy_file(dict("<f8", "(60,)"), a.bytes)));
    EXPECT_EQ(t.rows, 60u);
    EXPECT_EQ(t.cols, 1u);
    EXPECT_EQ(t.values, a.expected);
  }
  {
    const NumericTable t = read_npy(write("nhw.npy", npy_file(dict("<f8", "(5, 3, 4)"), a.bytes)));
    EXPECT_EQ(t.rows, 5u);
    EXPECT_EQ(t.cols, 12u);
    EXPECT_EQ(t.shape, (std::vector<std::size_t>{5, 3, 4}));
    // C order: element [i, j, k] is row i, column j·4 + k.
    EXPECT_EQ(t(4, 2 * 4 + 3), a.expected[4 * 12 + 2 * 4 + 3]);
    EXPECT_EQ(t.values, a.expected);
  }
  {
    const NumericTable t =
        read_npy(write("scalar.npy", npy_file(dict("<f8", "()"), a.bytes.substr(0, 8))));
    EXPECT_EQ(t.rows, 1u);
    EXPECT_EQ(t.cols, 1u);
    EXPECT_EQ(t.values[0], a.expected[0]);
  }
  {  // Header written by Python 2's numpy: double quotes, long suffixes, keys in another order.
    const std::string old = "{\"shape\": (3L, 20L), \"fortran_order\": False, \"descr\": \"<f8\"}";
    const NumericTable t = read_npy(write("py2.npy", npy_file(old, a.bytes, 1, 16)));
    EXPECT_EQ(t.rows, 3u);
    EXPECT_EQ(t.cols, 20u);
    EXPECT_EQ(t.values, a.expected);
  }
  {
    const NumericTable t =
        read_npy(write_gzip("g.npy.gz", npy_file(dict("<f8", "(6, 10)"), a.bytes)));
    EXPECT_EQ(t.rows, 6u);
    EXPECT_EQ(t.values, a.expected);
  }
}

TEST_F(NpyReaderTest, FortranOrderIsRejected) {
  const std::string p = write("f.npy", npy_file(dict("<f8", "(2, 2)", true), std::string(32, 'x')));
  expect_contains(invalid_argument_message([&] { read_npy(p); }),
                  {p, "Fortran", "C order only", "ascontiguousarray"});
}

TEST_F(NpyReaderTest, BadMagicIsRejected) {
  const std::string p = write("not.npy", "hello, world, this is text\n");
  expect_contains(invalid_argument_message([&] { read_npy(p); }), {p, "not an .npy file", "magic"});
  const std::string z = write("archive.npz", std::string("PK\x03\x04") + std::string(60, '\0'));
  expect_contains(invalid_argument_message([&] { read_npy(z); }), {z, "zip/.npz"});
  const std::string v = write("v9.npy", std::string("\x93NUMPY\x09\x00", 8) + std::string(8, ' '));
  expect_contains(invalid_argument_message([&] { read_npy(v); }),
                  {v, "unsupported .npy format version 9.0"});
}

TEST_F(NpyReaderTest, UnsupportedDtypesAreNamed) {
  const std::string data(64, '\0');
  for (const auto& [descr, phrase] :
       std::vector<std::pair<std::string, std::string>>{{"<c16", "complex"},
                                                        {"<U4", "strings"},
                                                        {"|O", "not a numeric"},
                                                        {"<f2", "4- and 8-byte"},
                                                        {"<M8[ns]", "not a numeric"},
                                                        {"<i3", "integer"}}) {
    SCOPED_TRACE(descr);
    const std::string p = write("d.npy", npy_file(dict(descr, "(2,)"), data));
    expect_contains(invalid_argument_message([&] { read_npy(p); }),
                    {p, "unsupported dtype '" + descr + "'", phrase, "astype('<f8')"});
  }
  const std::string big = write("big.npy", npy_file(dict(">f8", "(2,)"), std::string(16, '\0')));
  expect_contains(invalid_argument_message([&] { read_npy(big); }),
                  {big, "'>f8' is big-endian", "astype('<f8')"});
  const std::string rec = write("rec.npy", npy_file("{'descr': [('a', '<f8')], "
                                                    "'fortran_order': False, 'shape': (1,), }",
                                                    std::string(8, '\0')));
  expect_contains(invalid_argument_message([&] { read_npy(rec); }), {rec, "structured"});
}

TEST_F(NpyReaderTest, HeaderParseErrorsQuoteTheHeader) {
  for (const auto& [header, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"{'descr': '<f8', 'shape': (2,), }", "missing key 'fortran_order'"},
           {"{'descr': '<f8', 'fortran_order': Maybe, 'shape': (2,), }", "True or False"},
           {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, -1), }", "non-negative integer"},
           {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "'extra'"},
           {"['descr', '<f8']", "expected '{'"},
           {"{'descr': '<f8 , 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"},
           {"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
            "too large"}}) {
    SCOPED_TRACE(header);
    const std::string p = write("h.npy", npy_file(header, std::string(16, '\0')));
    expect_contains(invalid_argument_message([&] { read_npy(p); }),
                    {p, "header does not parse", phrase, "header text:"});
  }
}

TEST_F(NpyReaderTest, TruncatedAndOverlongFilesAreRejectedWithByteCounts) {
  std::mt19937_64 rng(5);
  const RandomArray<double> a = random_array<double>(rng, 12);
  const std::string full = npy_file(dict("<f8", "(4, 3)"), a.bytes);
  const std::string p = write("cut.npy", full.substr(0, full.size() - 5));
  expect_contains(invalid_argument_message([&] { read_npy(p); }),
                  {p, "truncated", "(4, 3)", "needs 96 bytes", "holds 91"});
  const std::string q = write("long.npy", full + "junk");
  expect_contains(invalid_argument_message([&] { read_npy(q); }),
                  {q, "4 bytes follow the 96 bytes of data"});
  const std::string r = write("cut_header.npy", full.substr(0, 30));
  expect_contains(invalid_argument_message([&] { read_npy(r); }), {r, "truncated", "header"});
  const std::string s = write("tiny.npy", full.substr(0, 8));
  expect_contains(invalid_argument_message([&] { read_npy(s); }), {s, "truncated"});
  const std::string e = write("empty.npy", npy_file(dict("<f8", "(0, 3)"), ""));
  expect_contains(invalid_argument_message([&] { read_npy(e); }), {e, "holds no values"});
}

// numpy itself writes the arrays (every format version, several dtypes and shapes); the
// reference values are the same arrays converted by numpy to little-endian float64 and dumped
// raw with tofile.
TEST_F(NpyReaderTest, FilesWrittenByNumpyReadExactly) {
  if (!testing::numpy_available()) GTEST_SKIP() << "python3 with numpy is not installed";
  const std::string script = path("make.py");
  write("make.py", R"(import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(12345)
cases = {
  'f8_v1': (rng.standard_normal((37, 5)) * 10.0 ** rng.integers(-8, 9, (37, 5)), (1, 0)),
  'f4_v2': (rng.standard_normal((9, 4, 6)).astype(np.float32), (2, 0)),
  'i2_v3': (rng.integers(-32768, 32768, 101).astype(np.int16), (3, 0)),
  'u1_v1': (rng.integers(0, 256, (12, 28)).astype(np.uint8), (1, 0)),
  'i8_v1': (rng.integers(-2**62, 2**62, (7, 3)), (1, 0)),
  'b1_v1': (rng.integers(0, 2, (6, 2)).astype(bool), (1, 0)),
}
for name, (a, version) in cases.items():
  with open(f'{out}/{name}.npy', 'wb') as f:
    np.lib.format.write_array(f, a, version=version)
  a.astype('<f8').tofile(f'{out}/{name}.f8')
  with open(f'{out}/{name}.shape', 'w') as f:
    f.write(' '.join(map(str, a.shape)))
np.save(f'{out}/fortran.npy', np.asfortranarray(rng.standard_normal((3, 4))))
)");
  const std::string command = "/usr/bin/python3 " + script + " " + dir().string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  for (const std::string name : {"f8_v1", "f4_v2", "i2_v3", "u1_v1", "i8_v1", "b1_v1"}) {
    SCOPED_TRACE(name);
    const NumericTable table = read_npy(path(name + ".npy"));
    const std::string raw = read_all(path(name + ".f8"));
    std::vector<double> expected(raw.size() / 8);
    std::memcpy(expected.data(), raw.data(), raw.size());
    std::istringstream shape_text(read_all(path(name + ".shape")));
    std::vector<std::size_t> shape;
    for (std::size_t d = 0; shape_text >> d;) shape.push_back(d);
    EXPECT_EQ(table.shape, shape);
    EXPECT_EQ(table.rows, shape[0]);
    EXPECT_EQ(table.rows * table.cols, expected.size());
    ASSERT_EQ(table.values, expected);
  }
  expect_contains(invalid_argument_message([&] { read_npy(path("fortran.npy")); }),
                  {"fortran.npy", "Fortran"});
}

}  // namespace
}  // namespace lmtrain::io
