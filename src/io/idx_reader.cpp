#include "lmtrain/io/idx_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <vector>

#include "byte_order.h"
#include "file_contents.h"
#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

struct IdxType {
  unsigned char code;
  std::size_t size;
  std::string_view name;
};

constexpr IdxType kTypes[] = {
    {0x08, 1, "unsigned byte"}, {0x09, 1, "signed byte"}, {0x0B, 2, "int16"},
    {0x0C, 4, "int32"},         {0x0D, 4, "float32"},     {0x0E, 8, "float64"},
};

double load_element(const unsigned char* p, unsigned char code) {
  using detail::load_big_endian;
  switch (code) {
    case 0x08:
      return static_cast<double>(p[0]);
    case 0x09:
      return static_cast<double>(static_cast<std::int8_t>(p[0]));
    case 0x0B:
      return static_cast<double>(load_big_endian<std::int16_t>(p));
    case 0x0C:
      return static_cast<double>(load_big_endian<std::int32_t>(p));
    case 0x0D:
      return static_cast<double>(load_big_endian<float>(p));
    default:
      return load_big_endian<double>(p);
  }
}

}  // namespace

NumericTable parse_idx(std::string_view bytes, const std::string& source) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4)
    throw InvalidArgument(
        fmt::format("{}: truncated IDX file: {} bytes, too short for the 4-byte magic number",
                    source, bytes.size()));
  if (data[0] != 0 || data[1] != 0)
    throw InvalidArgument(fmt::format(
        "{}: not an IDX file: the magic number must start with two zero bytes, found {:02x} {:02x} "
        "{:02x} {:02x}; IDX files (MNIST and relatives) start 00 00 08 03 for images, 00 00 08 01 "
        "for labels",
        source, data[0], data[1], data[2], data[3]));
  const IdxType* type = nullptr;
  for (const IdxType& t : kTypes)
    if (t.code == data[2]) type = &t;
  if (!type)
    throw InvalidArgument(fmt::format(
        "{}: unknown IDX type code 0x{:02x} in the magic number; valid codes are 0x08 (u8), 0x09 "
        "(i8), 0x0B (i16), 0x0C (i32), 0x0D (f32), 0x0E (f64)",
        source, data[2]));
  const std::size_t ndims = data[3];
  if (ndims == 0)
    throw InvalidArgument(fmt::format(
        "{}: the IDX magic number declares 0 dimensions; a data file has at least one", source));
  const std::size_t data_offset = 4 + 4 * ndims;
  if (bytes.size() < data_offset)
    throw InvalidArgument(fmt::format(
        "{}: truncated IDX file: {} dimensions need a {}-byte header, the file has {} bytes",
        source, ndims, data_offset, bytes.size()));

  std::vector<std::size_t> shape(ndims);
  std::size_t count = 1;
  for (std::size_t k = 0; k < ndims; ++k) {
    shape[k] = detail::load_big_endian<std::uint32_t>(data + 4 + 4 * k);
    if (__builtin_mul_overflow(count, shape[k], &count))
      throw InvalidArgument(
          fmt::format("{}: dimensions ({}) are too large to address; the header "
                      "is corrupt",
                      source, fmt::join(shape, " × ")));
  }
  std::size_t data_bytes = 0;
  if (__builtin_mul_overflow(count, type->size, &data_bytes))
    throw InvalidArgument(
        fmt::format("{}: dimensions ({}) are too large to address; the header "
                    "is corrupt",
                    source, fmt::join(shape, " × ")));
  const std::size_t available = bytes.size() - data_offset;
  if (available != data_bytes)
    throw InvalidArgument(fmt::format(
        "{}: {}: the header's dimensions {} of {} need {} bytes of data, the file holds {} after "
        "its {}-byte header; {}",
        source, available < data_bytes ? "truncated IDX file" : "IDX size mismatch",
        fmt::join(shape, " × "), type->name, data_bytes, available, data_offset,
        available < data_bytes ? "the file was cut short: fetch or decompress it again"
                               : "the dimensions disagree with the data: the file is corrupt"));
  if (count == 0)
    throw InvalidArgument(
        fmt::format("{}: the IDX dimensions {} hold no values", source, fmt::join(shape, " × ")));

  NumericTable table;
  table.source = source;
  table.shape = shape;
  table.rows = shape[0];
  table.cols = count / shape[0];
  table.values.resize(count);
  const unsigned char* element = data + data_offset;
  for (std::size_t i = 0; i < count; ++i, element += type->size)
    table.values[i] = load_element(element, type->code);
  return table;
}

NumericTable read_idx(const std::string& path) {
  const std::string bytes = detail::read_file_contents(path);
  return parse_idx(bytes, path);
}

}  // namespace lmtrain::io
