#include "lmtrain/io/npy_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "byte_order.h"
#include "file_contents.h"
#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::string_view kSupported = "<f4 <f8 <i1 <i2 <i4 <i8 <u1 <u2 <u4 <u8 |i1 |u1 |b1";

enum class ElementKind { kFloat, kSigned, kUnsigned, kBool };

struct ElementType {
  ElementKind kind;
  std::size_t size;
};

// The dictionary of an .npy header, a Python literal such as
//   {'descr': '<f8', 'fortran_order': False, 'shape': (60000, 784), }
// Only the three keys numpy writes are accepted, as numpy.load itself requires.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
};

class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, const std::string& source)
      : text_(text), source_(source) {}

  NpyHeader parse() {
    NpyHeader header;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[')
          fail(
              "'descr' is a list: a structured (record) dtype, which lmtrain does not read; save "
              "a plain numeric array, e.g. numpy.save(path, arr.astype('<f8'))");
        header.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = boolean_literal();
        has_order = true;
      } else if (key == "shape") {
        header.shape = tuple_of_sizes();
        has_shape = true;
      } else {
        fail(
            fmt::format("unexpected key '{}' (an .npy header holds exactly 'descr', "
                        "'fortran_order' and 'shape')",
                        key));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      fail(fmt::format("expected ',' or '}}' after the value of '{}'", key));
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) fail("text after the closing '}'");
    if (!has_descr || !has_order || !has_shape)
      fail(fmt::format("missing key{}{}{}", has_descr ? "" : " 'descr'",
                       has_order ? "" : " 'fortran_order'", has_shape ? "" : " 'shape'"));
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(fmt::format(
        "{}: the .npy header does not parse at character {}: {}; header text: {}; re-save the "
        "array with numpy.save",
        source_, pos_, what, quoted_header()));
  }
  std::string quoted_header() const {
    constexpr std::size_t kShown = 120;
    std::string shown(text_.substr(0, kShown));
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return fmt::format("\"{}{}\"", shown, text_.size() > kShown ? "…" : "");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail("escape sequences are not expected in an .npy header");
      ++pos_;
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool boolean_literal() {
    if (text_.substr(pos_).starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_).starts_with("False")) {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<std::size_t> tuple_of_sizes() {
    std::vector<std::size_t> sizes;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a non-negative integer dimension");
      std::size_t value = 0;
      while (peek() >= '0' && peek() <= '9') {
        const auto digit = static_cast<std::size_t>(peek() - '0');
        if (__builtin_mul_overflow(value, std::size_t{10}, &value) ||
            __builtin_add_overflow(value, digit, &value))
          fail("a dimension too large for this machine");
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literal, in files written by old numpy
      sizes.push_back(value);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape tuple");
    }
    ++pos_;  // ')'
    return sizes;
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

std::string shape_text(const std::vector<std::size_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

InvalidArgument unsupported_dtype(const std::string& descr, const std::string& source,
                                  std::string_view why) {
  return InvalidArgument(
      fmt::format("{}: unsupported dtype '{}' ({}); lmtrain reads {}; convert before saving, e.g. "
                  "numpy.save(path, arr.astype('<f8'))",
                  source, descr, why, kSupported));
}

// A dtype string's parts: '<f8' is byte order '<', kind 'f' and 8 bytes; a missing byte order
// is '=' (native), as numpy reads it.
struct TypeCode {
  char order = '=';
  char kind = '\0';
  std::size_t size = 0;
};

// Nothing when `descr` is not a byte order, a kind letter and a size in decimal digits.
std::optional<TypeCode> split_type_code(std::string_view descr) {
  TypeCode code;
  if (!descr.empty() &&
      (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    code.order = descr[0];
    descr.remove_prefix(1);
  }
  if (descr.size() < 2) return std::nullopt;
  code.kind = descr[0];
  for (char c : descr.substr(1)) {
    if (c < '0' || c > '9' || code.size > 64) return std::nullopt;
    code.size = code.size * 10 + static_cast<std::size_t>(c - '0');
  }
  return code;
}

// The element kind of a type code lmtrain reads; any other throws, saying why it is not read.
ElementKind element_kind(const TypeCode& code, const std::string& descr,
                         const std::string& source) {
  const std::size_t size = code.size;
  switch (code.kind) {
    case 'f':
      if (size != 4 && size != 8)
        throw unsupported_dtype(descr, source, "only 4- and 8-byte floats");
      return ElementKind::kFloat;
    case 'i':
    case 'u':
      if (size != 1 && size != 2 && size != 4 && size != 8)
        throw unsupported_dtype(descr, source, "not a 1-, 2-, 4- or 8-byte integer");
      return code.kind == 'i' ? ElementKind::kSigned : ElementKind::kUnsigned;
    case 'b':
      if (size != 1) throw unsupported_dtype(descr, source, "not a 1-byte bool");
      return ElementKind::kBool;
    case 'c':
      throw unsupported_dtype(descr, source, "complex numbers");
    case 'U':
    case 'S':
      throw unsupported_dtype(descr, source, "strings");
    case 'O':
      throw unsupported_dtype(descr, source, "Python objects");
    case 'M':
    case 'm':
      throw unsupported_dtype(descr, source, "dates or time deltas");
    default:
      throw unsupported_dtype(descr, source, "not a numeric type code");
  }
}

ElementType parse_descr(const std::string& descr, const std::string& source) {
  const std::optional<TypeCode> code = split_type_code(descr);
  if (!code) throw unsupported_dtype(descr, source, "not a numeric type code");
  const ElementKind kind = element_kind(*code, descr, source);
  if (code->order == '>' && code->size > 1)
    throw InvalidArgument(fmt::format(
        "{}: dtype '{}' is big-endian; lmtrain reads little-endian arrays: convert with "
        "numpy.save(path, arr.astype('<{}{}'))",
        source, descr, code->kind, code->size));
  return {kind, code->size};
}

double load_element(const unsigned char* p, ElementType type) {
  using detail::load_little_endian;
  switch (type.kind) {
    case ElementKind::kFloat:
      return type.size == 4 ? static_cast<double>(load_little_endian<float>(p))
                            : load_little_endian<double>(p);
    case ElementKind::kSigned:
      switch (type.size) {
        case 1:
          return static_cast<double>(load_little_endian<std::int8_t>(p));
        case 2:
          return static_cast<double>(load_little_endian<std::int16_t>(p));
        case 4:
          return static_cast<double>(load_little_endian<std::int32_t>(p));
        default:
          return static_cast<double>(load_little_endian<std::int64_t>(p));
      }
    case ElementKind::kUnsigned:
      switch (type.size) {
        case 1:
          return static_cast<double>(p[0]);
        case 2:
          return static_cast<double>(load_little_endian<std::uint16_t>(p));
        case 4:
          return static_cast<double>(load_little_endian<std::uint32_t>(p));
        default:
          return static_cast<double>(load_little_endian<std::uint64_t>(p));
      }
    case ElementKind::kBool:
      return p[0] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

}  // namespace

NumericTable parse_npy(std::string_view bytes, const std::string& source) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  if (!bytes.starts_with(kMagic))
    throw InvalidArgument(fmt::format(
        "{}: not an .npy file: it does not start with the magic \"\\x93NUMPY\"{}; write arrays "
        "with numpy.save (an .npz archive must be unpacked first)",
        source, bytes.starts_with("PK") ? " (it looks like a zip/.npz archive)" : ""));
  if (bytes.size() < 10)
    throw InvalidArgument(fmt::format(
        "{}: truncated .npy file: {} bytes, too short for the version and header length", source,
        bytes.size()));
  const unsigned major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0)
    throw InvalidArgument(fmt::format(
        "{}: unsupported .npy format version {}.{}; lmtrain reads versions 1.0, 2.0 and 3.0",
        source, major, minor));
  const std::size_t length_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_size)
    throw InvalidArgument(
        fmt::format("{}: truncated .npy file: {} bytes, too short for the "
                    "header length of format {}.0",
                    source, bytes.size(), major));
  const std::size_t header_length = major == 1
                                        ? detail::load_little_endian<std::uint16_t>(data + 8)
                                        : detail::load_little_endian<std::uint32_t>(data + 8);
  const std::size_t data_offset = 8 + length_size + header_length;
  if (bytes.size() < data_offset)
    throw InvalidArgument(fmt::format(
        "{}: truncated .npy file: the header is {} bytes long but the file ends after {} bytes",
        source, header_length, bytes.size()));

  const NpyHeader header =
      NpyHeaderParser(bytes.substr(8 + length_size, header_length), source).parse();
  if (header.fortran_order)
    throw InvalidArgument(fmt::format(
        "{}: the array is stored in Fortran (column-major) order; lmtrain reads C order only: "
        "save numpy.ascontiguousarray(arr) instead",
        source));
  const ElementType type = parse_descr(header.descr, source);

  std::size_t count = 1;
  for (std::size_t dim : header.shape)
    if (__builtin_mul_overflow(count, dim, &count))
      throw InvalidArgument(
          fmt::format("{}: shape {} has more elements than this machine can "
                      "address; the header is corrupt",
                      source, shape_text(header.shape)));
  std::size_t data_bytes = 0;
  if (__builtin_mul_overflow(count, type.size, &data_bytes))
    throw InvalidArgument(
        fmt::format("{}: shape {} of '{}' is too large to address; the header "
                    "is corrupt",
                    source, shape_text(header.shape), header.descr));
  const std::size_t available = bytes.size() - data_offset;
  if (available < data_bytes)
    throw InvalidArgument(fmt::format(
        "{}: truncated .npy file: shape {} of '{}' needs {} bytes of data, the file holds {} "
        "after its {}-byte header; the file was cut short: save it again",
        source, shape_text(header.shape), header.descr, data_bytes, available, data_offset));
  if (available > data_bytes)
    throw InvalidArgument(fmt::format(
        "{}: {} bytes follow the {} bytes of data that shape {} of '{}' accounts for; the file "
        "is corrupt or holds more than one array (use numpy.save for a single array)",
        source, available - data_bytes, data_bytes, shape_text(header.shape), header.descr));

  NumericTable table;
  table.source = source;
  table.shape = header.shape;
  table.rows = header.shape.empty() ? 1 : header.shape[0];
  table.cols = table.rows == 0 ? 0 : count / table.rows;
  if (count == 0)
    throw InvalidArgument(
        fmt::format("{}: the array has shape {} and holds no values; there is "
                    "nothing to train or predict on",
                    source, shape_text(header.shape)));
  table.values.resize(count);
  const unsigned char* element = data + data_offset;
  for (std::size_t i = 0; i < count; ++i, element += type.size)
    table.values[i] = load_element(element, type);
  return table;
}

NumericTable read_npy(const std::string& path) {
  const std::string bytes = detail::read_file_contents(path);
  return parse_npy(bytes, path);
}

}  // namespace lmtrain::io
