// The safetensors container (Hugging Face, https://github.com/huggingface/safetensors): named
// tensors with a dtype and a shape, plus string-to-string metadata, in one file that Python's
// `safetensors` package (safetensors.numpy / safetensors.torch .load_file) reads as it is.
//
// Layout, as the reference implementation (safetensors/src/tensor.rs) writes and checks it:
//   bytes [0, 8)       N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)   a UTF-8 JSON object: {"__metadata__": {"key": "value", …},
//                        "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, …}
//                      padded with spaces so that 8 + N is a multiple of 8 (the data is aligned)
//   bytes [8 + N, …)   the data: tensor `name` is bytes [b, e) of it, C order, little-endian;
//                      the ranges cover the data exactly, without gaps or overlaps.
// This file is the generic container only; records/model_file.h gives the tensors their meaning.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmtrain::io::detail {

// The element types of the format, by their names in the header.  Only F32 and F64 convert to
// numbers here (tensor_values); the others are read and validated but kept as bytes.
enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64
};

// "F32", "F64", "BF16", … as the header spells them.
std::string_view to_string(SafetensorsDtype dtype);
std::optional<SafetensorsDtype> parse_safetensors_dtype(std::string_view name);
std::size_t element_size(SafetensorsDtype dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF64;
  std::vector<std::size_t> shape;  // [] is a scalar (one element)
  std::string bytes;               // C order, little-endian, product(shape)·element_size bytes

  // A tensor of float (F32) or double (F64) values; throws InvalidArgument when the shape's
  // product differs from values.size().
  template <typename T>
  static SafetensorsTensor from_values(std::string name, std::vector<std::size_t> shape,
                                       std::span<const T> values);
  std::size_t num_elements() const;
};

// The values of an F32 or F64 tensor as doubles (exact for both).  Throws InvalidArgument naming
// the tensor and `source` for any other dtype.
std::vector<double> tensor_values(const SafetensorsTensor& tensor, const std::string& source);

struct SafetensorsFile {
  // In the order the writer lays them out (see encode_safetensors) or the reader found them
  // (ascending data offsets).
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"; empty = none written

  const SafetensorsTensor* find(std::string_view name) const;
};

// The largest header accepted, as in the reference implementation (MAX_HEADER_SIZE): a larger
// length field is a corrupt or hostile file, not a model.
inline constexpr std::size_t kMaxSafetensorsHeader = 100'000'000;

// The complete file.  Tensors are laid out by decreasing element size (stable, so tensors of one
// dtype keep the given order) so that every tensor starts aligned to its element size; the header
// lists "__metadata__" first (omitted when empty), then the tensors in layout order, as compact
// JSON.  Throws InvalidArgument for an empty or duplicate name, the reserved name
// "__metadata__", a byte count that differs from shape × element size, and names or metadata that
// are not valid UTF-8.
std::string encode_safetensors(const SafetensorsFile& file);

// Parses bytes already in memory; `source` (a path) names them in messages.  Throws
// InvalidArgument naming `source` and the problem for: fewer than 8 bytes; a header length
// beyond the file or kMaxSafetensorsHeader; a header that is not a JSON object or not valid JSON
// (with the parser's position); duplicate keys; a "__metadata__" that is not an object of
// strings; a tensor entry that is not an object of exactly "dtype", "shape", "data_offsets"; an
// unknown dtype; a shape that is not an array of non-negative integers; data_offsets that are
// not [begin, end] with begin ≤ end; a byte range whose length differs from shape × element
// size; ranges that overlap, leave a gap, start past 0 or run past the end of the file; and bytes
// after the last tensor.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source);

// Reads `path` (raw bytes, never decompressed) and parses it.  Throws InvalidArgument naming the
// path when it cannot be opened or read, and as parse_safetensors.
SafetensorsFile read_safetensors(const std::string& path);

// Writes encode_safetensors(file) to `path` atomically (io/atomic_write.h).
void write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace lmtrain::io::detail
