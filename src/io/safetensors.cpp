#include "safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "byte_order.h"
#include "file_contents.h"
#include "lmtrain/core/error.h"
#include "lmtrain/io/atomic_write.h"

namespace lmtrain::io::detail {
namespace {

// Ordered, so that tensors at the same offset (empty ones) keep the header's order: reading what
// encode_safetensors wrote gives back its layout order exactly.
using Json = nlohmann::ordered_json;

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  std::size_t size;
};

// The names and sizes of safetensors/src/tensor.rs (enum Dtype).
constexpr std::array<DtypeInfo, 15> kDtypes = {{
    {SafetensorsDtype::kBool, "BOOL", 1},
    {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},
    {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},
    {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},
    {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},
    {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},
    {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
}};

const DtypeInfo& info(SafetensorsDtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d;
  return kDtypes[0];  // unreachable: every enumerator is listed
}

// product(shape), or nullopt on overflow.
std::optional<std::size_t> element_count(const std::vector<std::size_t>& shape) {
  std::size_t count = 1;
  for (std::size_t d : shape)
    if (__builtin_mul_overflow(count, d, &count)) return std::nullopt;
  return count;
}

std::optional<std::size_t> byte_count(SafetensorsDtype dtype,
                                      const std::vector<std::size_t>& shape) {
  const auto count = element_count(shape);
  std::size_t bytes = 0;
  if (!count || __builtin_mul_overflow(*count, element_size(dtype), &bytes)) return std::nullopt;
  return bytes;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Raises the error of a malformed file: "<source>: <what>".
[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  throw InvalidArgument(fmt::format("\"{}\" is not a valid safetensors file: {}", source, what));
}

// A JSON value for messages, cut short so that a huge header does not flood the terminal.
std::string excerpt(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// The header as JSON, rejecting duplicate keys in any object (nlohmann keeps the last one
// silently, and two entries for one tensor name must not pass as one).
Json parse_header(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const Json::parser_callback_t check_keys = [&](int /*depth*/, Json::parse_event_t event,
                                                 Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !open_objects.empty() && duplicate.empty()) {
      std::string key = parsed.get<std::string>();
      if (!open_objects.back().insert(key).second) duplicate = std::move(key);
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text.begin(), text.end(), check_keys);
  } catch (const Json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9: …"; a
    // number too large for any JSON number type is an out_of_range (406), also malformed input.
    std::string reason = e.what();
    if (const auto pos = reason.find("] "); pos != std::string::npos) reason.erase(0, pos + 2);
    malformed(source, fmt::format("the JSON header ({} bytes from byte 8) does not parse: {}",
                                  text.size(), reason));
  }
  if (!duplicate.empty())
    malformed(source,
              fmt::format("the JSON header has the key \"{}\" twice in one object", duplicate));
  if (!header.is_object())
    malformed(source, fmt::format("the JSON header is a {}, expected an object of tensors",
                                  header.type_name()));
  return header;
}

std::size_t parse_index(const Json& value, const std::string& source, const std::string& where) {
  if (!value.is_number_unsigned())
    malformed(source,
              fmt::format("{} is {}; expected a non-negative integer", where, excerpt(value)));
  return value.get<std::size_t>();
}

struct Entry {
  SafetensorsTensor tensor;
  std::size_t begin = 0;
  std::size_t end = 0;
};

Entry parse_entry(const std::string& name, const Json& value, const std::string& source) {
  const std::string where = fmt::format("tensor \"{}\"", name);
  if (!value.is_object())
    malformed(source, fmt::format("{} is {}; expected an object with \"dtype\", \"shape\" and "
                                  "\"data_offsets\"",
                                  where, excerpt(value)));
  for (const auto& [key, v] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      malformed(source, fmt::format("{} has the unknown key \"{}\"; expected only \"dtype\", "
                                    "\"shape\" and \"data_offsets\"",
                                    where, key));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) malformed(source, fmt::format("{} has no \"{}\"", where, key));

  Entry entry;
  entry.tensor.name = name;
  const Json& dtype = value["dtype"];
  const auto parsed =
      dtype.is_string() ? parse_safetensors_dtype(dtype.get<std::string>()) : std::nullopt;
  if (!parsed) {
    std::vector<std::string_view> names;
    for (const auto& d : kDtypes) names.push_back(d.name);
    malformed(source, fmt::format("{} has dtype {}; expected one of {}", where, excerpt(dtype),
                                  fmt::join(names, ", ")));
  }
  entry.tensor.dtype = *parsed;

  const Json& shape = value["shape"];
  if (!shape.is_array())
    malformed(source, fmt::format("{} has shape {}; expected an array of dimensions", where,
                                  excerpt(shape)));
  for (std::size_t i = 0; i < shape.size(); ++i)
    entry.tensor.shape.push_back(
        parse_index(shape[i], source, fmt::format("{}: shape[{}]", where, i)));

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    malformed(source, fmt::format("{} has data_offsets {}; expected [begin, end]", where,
                                  excerpt(offsets)));
  entry.begin = parse_index(offsets[0], source, where + ": data_offsets[0]");
  entry.end = parse_index(offsets[1], source, where + ": data_offsets[1]");
  if (entry.begin > entry.end)
    malformed(source, fmt::format("{} has data_offsets [{}, {}]: begin after end", where,
                                  entry.begin, entry.end));

  const auto expected = byte_count(entry.tensor.dtype, entry.tensor.shape);
  if (!expected)
    malformed(source, fmt::format("{} has shape {}: its byte count overflows 64 bits", where,
                                  shape_text(entry.tensor.shape)));
  if (*expected != entry.end - entry.begin)
    malformed(source,
              fmt::format("{} has dtype {} and shape {}, i.e. {} bytes, but data_offsets [{}, {}] "
                          "span {} bytes",
                          where, to_string(entry.tensor.dtype), shape_text(entry.tensor.shape),
                          *expected, entry.begin, entry.end, entry.end - entry.begin));
  return entry;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& source) {
  if (!value.is_object())
    malformed(source,
              fmt::format("\"__metadata__\" is {}; expected an object of strings", excerpt(value)));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string())
      malformed(source, fmt::format("\"__metadata__\" entry \"{}\" is {}; the format allows only "
                                    "string values",
                                    key, excerpt(v)));
    metadata.emplace(key, v.get<std::string>());
  }
  return metadata;
}

// The header JSON without the parser's reordering: "__metadata__" first, then the tensors in
// layout order, compact, as the reference implementation serializes it.
std::string header_text(const SafetensorsFile& file, const std::vector<std::size_t>& order,
                        const std::vector<std::size_t>& offsets) {
  const auto quoted = [](const std::string& s, const char* what) {
    try {
      return Json(s).dump();
    } catch (const Json::type_error&) {
      throw InvalidArgument(fmt::format(
          "encode_safetensors: the {} \"{}\" is not valid UTF-8; the header is JSON, which "
          "holds only UTF-8 text",
          what, Json(s).dump(-1, ' ', false, Json::error_handler_t::replace)));
    }
  };
  std::string text = "{";
  if (!file.metadata.empty()) {
    text += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : file.metadata) {
      if (!first) text += ',';
      first = false;
      text += quoted(key, "metadata key");
      text += ':';
      text += quoted(value, "metadata value");
    }
    text += '}';
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    const SafetensorsTensor& t = file.tensors[order[k]];
    if (text.size() > 1) text += ',';
    text += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                        quoted(t.name, "tensor name"), to_string(t.dtype), fmt::join(t.shape, ","),
                        offsets[k], offsets[k] + t.bytes.size());
  }
  text += '}';
  return text;
}

}  // namespace

std::string_view to_string(SafetensorsDtype dtype) {
  return info(dtype).name;
}

std::optional<SafetensorsDtype> parse_safetensors_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::size_t element_size(SafetensorsDtype dtype) {
  return info(dtype).size;
}

template <typename T>
SafetensorsTensor SafetensorsTensor::from_values(std::string name, std::vector<std::size_t> shape,
                                                 std::span<const T> values) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const auto count = element_count(shape);
  if (!count || *count != values.size())
    throw InvalidArgument(fmt::format(
        "safetensors tensor \"{}\": shape {} holds {} values but {} "
        "were given",
        name, shape_text(shape), count ? fmt::format("{}", *count) : "too many", values.size()));
  SafetensorsTensor t;
  t.name = std::move(name);
  t.dtype = std::is_same_v<T, float> ? SafetensorsDtype::kF32 : SafetensorsDtype::kF64;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * sizeof(T));
  auto* p = reinterpret_cast<unsigned char*>(t.bytes.data());
  for (T v : values) {
    store_little_endian(v, p);
    p += sizeof(T);
  }
  return t;
}

template SafetensorsTensor SafetensorsTensor::from_values<float>(std::string,
                                                                 std::vector<std::size_t>,
                                                                 std::span<const float>);
template SafetensorsTensor SafetensorsTensor::from_values<double>(std::string,
                                                                  std::vector<std::size_t>,
                                                                  std::span<const double>);

std::size_t SafetensorsTensor::num_elements() const {
  return element_count(shape).value_or(0);
}

std::vector<double> tensor_values(const SafetensorsTensor& tensor, const std::string& source) {
  const auto* p = reinterpret_cast<const unsigned char*>(tensor.bytes.data());
  std::vector<double> values;
  if (tensor.dtype == SafetensorsDtype::kF64) {
    values.resize(tensor.bytes.size() / 8);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = load_little_endian<double>(p + 8 * i);
  } else if (tensor.dtype == SafetensorsDtype::kF32) {
    values.resize(tensor.bytes.size() / 4);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<double>(load_little_endian<float>(p + 4 * i));
  } else {
    throw InvalidArgument(fmt::format("\"{}\": tensor \"{}\" has dtype {}; expected F32 or F64",
                                      source, tensor.name, to_string(tensor.dtype)));
  }
  return values;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string encode_safetensors(const SafetensorsFile& file) {
  std::set<std::string_view> names;
  for (const auto& t : file.tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw InvalidArgument(fmt::format(
          "encode_safetensors: the tensor name \"{}\" is not allowed; give every tensor a "
          "non-empty name other than \"__metadata__\"",
          t.name));
    if (!names.insert(t.name).second)
      throw InvalidArgument(fmt::format(
          "encode_safetensors: two tensors are named \"{}\"; names must be unique", t.name));
    const auto expected = byte_count(t.dtype, t.shape);
    if (!expected || *expected != t.bytes.size())
      throw InvalidArgument(fmt::format(
          "encode_safetensors: tensor \"{}\" has dtype {} and shape {} but {} bytes of data",
          t.name, to_string(t.dtype), shape_text(t.shape), t.bytes.size()));
  }

  // Decreasing element size keeps every tensor aligned to its own element size, given that the
  // data starts at a multiple of 8.
  std::vector<std::size_t> order(file.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return element_size(file.tensors[a].dtype) > element_size(file.tensors[b].dtype);
  });
  std::vector<std::size_t> offsets(order.size());
  std::size_t data_size = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    offsets[k] = data_size;
    data_size += file.tensors[order[k]].bytes.size();
  }

  std::string header = header_text(file, order, offsets);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + header.size() + data_size);
  unsigned char length[8];
  store_little_endian(static_cast<std::uint64_t>(header.size()), length);
  out.append(reinterpret_cast<const char*>(length), 8);
  out += header;
  for (std::size_t i : order) out += file.tensors[i].bytes;
  return out;
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8)
    malformed(source, fmt::format("the file has {} bytes, fewer than the 8 of the header length",
                                  bytes.size()));
  const auto header_length =
      load_little_endian<std::uint64_t>(reinterpret_cast<const unsigned char*>(bytes.data()));
  if (header_length > kMaxSafetensorsHeader)
    malformed(source, fmt::format("the header length field says {} bytes, more than the {} the "
                                  "format allows (a corrupt or truncated file?)",
                                  header_length, kMaxSafetensorsHeader));
  if (header_length > bytes.size() - 8)
    malformed(source, fmt::format("the header length field says {} bytes but the file has only "
                                  "{} bytes after it (truncated file?)",
                                  header_length, bytes.size() - 8));
  const std::string_view text = bytes.substr(8, header_length);
  const std::string_view data = bytes.substr(8 + header_length);
  const Json header = parse_header(text, source);

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      file.metadata = parse_metadata(value, source);
    } else {
      entries.push_back(parse_entry(key, value, source));
    }
  }

  // The ranges must tile [0, data.size()) exactly, as the reference reader demands.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::size_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.end > data.size())
      malformed(source, fmt::format("tensor \"{}\" has data_offsets [{}, {}], past the end of the "
                                    "{} data bytes (truncated file?)",
                                    e.tensor.name, e.begin, e.end, data.size()));
    if (e.begin < covered)
      malformed(source, fmt::format("tensor \"{}\" (data_offsets [{}, {}]) overlaps tensor \"{}\" "
                                    "(data_offsets [{}, {}])",
                                    e.tensor.name, e.begin, e.end, previous->tensor.name,
                                    previous->begin, previous->end));
    if (e.begin > covered)
      malformed(source,
                fmt::format("bytes [{}, {}) of the data belong to no tensor: tensor \"{}\" starts "
                            "at {}; tensors must be laid out without gaps",
                            covered, e.begin, e.tensor.name, e.begin));
    covered = e.end;
    previous = &e;
  }
  if (covered != data.size())
    malformed(source, fmt::format("the tensors cover {} data bytes but the file has {} after the "
                                  "header; the last {} bytes belong to no tensor",
                                  covered, data.size(), data.size() - covered));

  file.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    e.tensor.bytes.assign(data.substr(e.begin, e.end - e.begin));
    file.tensors.push_back(std::move(e.tensor));
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  // The readers' shared file loader: errno-named errors, and gzip read transparently.
  return parse_safetensors(read_file_contents(path), path);
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  write_file_atomically(path, encode_safetensors(file));
}

}  // namespace lmtrain::io::detail
