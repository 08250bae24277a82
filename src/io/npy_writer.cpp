#include "lmtrain/io/npy_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "byte_order.h"
#include "lmtrain/core/error.h"
#include "lmtrain/io/atomic_write.h"

namespace lmtrain::io {

template <typename T>
std::string encode_npy(std::span<const T> values, std::span<const std::size_t> shape) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  std::size_t count = 1;
  bool overflow = false;
  for (std::size_t dim : shape) overflow |= __builtin_mul_overflow(count, dim, &count);
  if (overflow || count != values.size())
    throw InvalidArgument(fmt::format("encode_npy: shape ({}) holds {} values but {} were given",
                                      fmt::join(shape, ", "), count, values.size()));

  // The header dictionary exactly as numpy.lib.format writes it.
  const std::string shape_text = shape.size() == 1 ? fmt::format("({},)", shape[0])
                                                   : fmt::format("({})", fmt::join(shape, ", "));
  std::string header = fmt::format("{{'descr': '<f{}', 'fortran_order': False, 'shape': {}, }}",
                                   sizeof(T), shape_text);
  // Magic (6) + version (2) + header length (2 in 1.0, 4 in 2.0) + header, padded with spaces and
  // a final '\n' to a multiple of 64 bytes so the data is aligned for memory mapping.
  constexpr std::size_t kAlign = 64;
  const bool version2 = header.size() + 1 + 10 > 65535;
  const std::size_t prefix = version2 ? 12 : 10;
  const std::size_t padded = (prefix + header.size() + 1 + kAlign - 1) / kAlign * kAlign;
  header.append(padded - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::string out;
  out.reserve(padded + values.size() * sizeof(T));
  out.append("\x93NUMPY", 6);
  out.push_back(static_cast<char>(version2 ? 2 : 1));
  out.push_back('\0');
  unsigned char length[4];
  if (version2) {
    detail::store_little_endian(static_cast<std::uint32_t>(header.size()), length);
  } else {
    detail::store_little_endian(static_cast<std::uint16_t>(header.size()), length);
  }
  out.append(reinterpret_cast<const char*>(length), version2 ? 4 : 2);
  out += header;
  const std::size_t data_start = out.size();
  out.resize(data_start + values.size() * sizeof(T));
  auto* p = reinterpret_cast<unsigned char*>(out.data() + data_start);
  for (T v : values) {
    detail::store_little_endian(v, p);
    p += sizeof(T);
  }
  return out;
}

template <typename T>
void write_npy(const std::string& path, std::span<const T> values,
               std::span<const std::size_t> shape) {
  write_file_atomically(path, encode_npy(values, shape));
}

void write_npy(const std::string& path, const NumericTable& table) {
  const std::size_t shape[] = {table.rows, table.cols};
  write_npy<double>(path, table.values, shape);
}

template std::string encode_npy<float>(std::span<const float>, std::span<const std::size_t>);
template std::string encode_npy<double>(std::span<const double>, std::span<const std::size_t>);
template void write_npy<float>(const std::string&, std::span<const float>,
                               std::span<const std::size_t>);
template void write_npy<double>(const std::string&, std::span<const double>,
                                std::span<const std::size_t>);

}  // namespace lmtrain::io
