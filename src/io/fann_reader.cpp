#include "lmtrain/io/fann_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "file_contents.h"
#include "lmtrain/core/error.h"
#include "number_token.h"

namespace lmtrain::io {
namespace {

// Whitespace-separated tokens with the 1-based line each starts on.
class TokenStream {
 public:
  explicit TokenStream(std::string_view text) : text_(text) {}

  bool next(std::string_view& token, std::size_t& line) {
    while (pos_ < text_.size() && is_space(text_[pos_])) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ >= text_.size()) return false;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && !is_space(text_[pos_])) ++pos_;
    token = text_.substr(start, pos_ - start);
    line = line_;
    return true;
  }
  std::size_t line() const { return line_; }

 private:
  static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  }
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

std::string quote_token(std::string_view token) {
  constexpr std::size_t kShown = 40;
  if (token.size() <= kShown) return fmt::format("\"{}\"", token);
  return fmt::format("\"{}…\" ({} characters)", token.substr(0, kShown), token.size());
}

// The three integers a FANN file starts with, and how many numbers they promise after them.
struct FannHeader {
  std::size_t num_data = 0, num_input = 0, num_output = 0;
  std::size_t line = 1;        // where num_data stands
  std::size_t per_sample = 0;  // num_input + num_output
  std::size_t promised = 0;    // num_data · per_sample

  std::string promise() const {
    return fmt::format(
        "the header (line {}) promises {} samples × ({} inputs + {} outputs) = {} "
        "numbers",
        line, num_data, num_input, num_output, promised);
  }
};

// A header count: decimal digits only (no sign, no exponent), without overflow.
std::optional<std::size_t> header_count(std::string_view token) {
  std::size_t value = 0;
  bool ok = !token.empty();
  for (char c : token) {
    ok = ok && c >= '0' && c <= '9' && !__builtin_mul_overflow(value, std::size_t{10}, &value) &&
         !__builtin_add_overflow(value, static_cast<std::size_t>(c - '0'), &value);
  }
  return ok ? std::optional<std::size_t>(value) : std::nullopt;
}

FannHeader read_header(TokenStream& tokens, const std::string& source) {
  static constexpr const char* kHeaderNames[] = {"num_data", "num_input", "num_output"};
  FannHeader h;
  std::size_t* counts[] = {&h.num_data, &h.num_input, &h.num_output};
  for (int k = 0; k < 3; ++k) {
    std::string_view token;
    std::size_t line = 0;
    if (!tokens.next(token, line))
      throw InvalidArgument(fmt::format(
          "{}:{}: the FANN header ends before {}: a FANN file starts with the three integers "
          "\"num_data num_input num_output\"",
          source, tokens.line(), kHeaderNames[k]));
    if (k == 0) h.line = line;
    const std::optional<std::size_t> count = header_count(token);
    if (!count)
      throw InvalidArgument(fmt::format(
          "{}:{}: line {}: {} in the FANN header is {}, expected a non-negative integer; a FANN "
          "file starts with \"num_data num_input num_output\"",
          source, line, line, kHeaderNames[k], quote_token(token)));
    *counts[k] = *count;
  }
  if (h.num_data == 0 || h.num_input == 0)
    throw InvalidArgument(
        fmt::format("{}:{}: the FANN header \"{} {} {}\" declares {}; there is nothing to read",
                    source, h.line, h.num_data, h.num_input, h.num_output,
                    h.num_data == 0 ? "no samples" : "samples without inputs"));
  if (__builtin_add_overflow(h.num_input, h.num_output, &h.per_sample) ||
      __builtin_mul_overflow(h.num_data, h.per_sample, &h.promised))
    throw InvalidArgument(
        fmt::format("{}:{}: the FANN header \"{} {} {}\" is too large to "
                    "address; the header is corrupt",
                    source, h.line, h.num_data, h.num_input, h.num_output));
  return h;
}

// The two tables the header declares, empty, with room for what the text can hold.
FannTrainData empty_tables(const FannHeader& h, std::size_t text_size, const std::string& source) {
  FannTrainData result;
  NumericTable* parts[] = {&result.inputs, &result.outputs};
  for (NumericTable* part : parts) {
    part->source = source;
    part->rows = h.num_data;
    // Reserve for what the text can hold (a number and a separator take at least 2 bytes), not
    // what the header claims: a corrupt header must not allocate terabytes.  No overflow:
    // num_data · cols ≤ promised.
    const std::size_t text_limit = text_size / 2 + 1;
    const std::size_t cols = part == &result.inputs ? h.num_input : h.num_output;
    part->values.reserve(std::min(h.num_data * cols, text_limit));
    part->source_lines.reserve(std::min(h.num_data, text_limit));
  }
  result.inputs.cols = h.num_input;
  result.outputs.cols = h.num_output;
  return result;
}

// The body's i-th number (0-based), read from `token` on `line`, with messages that name its
// sample and its place in it.
double sample_value(std::string_view token, std::size_t line, std::size_t i, const FannHeader& h,
                    const std::string& source, const FannOptions& options) {
  double value = 0.0;
  const detail::NumberToken kind = detail::parse_number(token, value);
  const std::size_t sample = i / h.per_sample, position = i % h.per_sample;
  const bool is_input = position < h.num_input;
  const auto where = [&] {
    return fmt::format("{}:{}: line {}: {} {} of {} of sample {} (0-based)", source, line, line,
                       is_input ? "input" : "output",
                       (is_input ? position : position - h.num_input) + 1,
                       is_input ? h.num_input : h.num_output, sample);
  };
  if (kind == detail::NumberToken::kNotANumber)
    throw InvalidArgument(fmt::format("{} is {}, expected a number", where(), quote_token(token)));
  if (kind == detail::NumberToken::kOutOfRange)
    throw InvalidArgument(
        fmt::format("{} is {}, outside the range of double", where(), quote_token(token)));
  if (options.allow_non_finite || std::isfinite(value)) return value;
  throw InvalidArgument(
      fmt::format("{} is {}, which is not finite; remove or impute the value, or set "
                  "FannOptions::allow_non_finite to read it anyway",
                  where(), quote_token(token)));
}

// The numbers the header promises, sample after sample, into the two tables.
void read_samples(TokenStream& tokens, const FannHeader& h, const std::string& source,
                  const FannOptions& options, FannTrainData& result) {
  std::string_view token;
  std::size_t line = 0;
  for (std::size_t i = 0; i < h.promised; ++i) {
    const std::size_t position = i % h.per_sample;
    if (!tokens.next(token, line))
      throw InvalidArgument(fmt::format(
          "{}:{}: the file ends after {} numbers, {}; sample {} (0-based) is {}; fix num_data in "
          "the header or restore the missing lines",
          source, tokens.line(), i, h.promise(), i / h.per_sample,
          position == 0 ? "missing"
                        : fmt::format("incomplete ({} of {} values)", position, h.per_sample)));
    const double value = sample_value(token, line, i, h, source, options);
    NumericTable& part = position < h.num_input ? result.inputs : result.outputs;
    if (position == 0 || position == h.num_input) part.source_lines.push_back(line);
    part.values.push_back(value);
  }
}

// Whatever follows the promised numbers is an error that counts it all.
void reject_extra_numbers(TokenStream& tokens, const FannHeader& h, const std::string& source) {
  std::string_view token;
  std::size_t line = 0;
  if (!tokens.next(token, line)) return;
  const std::size_t first_extra_line = line;
  const std::string first_extra = quote_token(token);
  std::size_t extra = 1;
  while (tokens.next(token, line)) ++extra;
  throw InvalidArgument(fmt::format(
      "{}:{}: the file holds {} numbers after the header, {} more than {}; the first extra "
      "value is {} on line {}; fix num_data (or num_input/num_output) in the header",
      source, first_extra_line, h.promised + extra, extra, h.promise(), first_extra,
      first_extra_line));
}

}  // namespace

FannTrainData parse_fann(std::string_view text, const std::string& source,
                         const FannOptions& options) {
  TokenStream tokens(text);
  const FannHeader header = read_header(tokens, source);
  FannTrainData result = empty_tables(header, text.size(), source);
  read_samples(tokens, header, source, options, result);
  reject_extra_numbers(tokens, header, source);
  if (header.num_output == 0) result.outputs.source_lines = result.inputs.source_lines;
  result.inputs.shape = {header.num_data, header.num_input};
  result.outputs.shape = {header.num_data, header.num_output};
  return result;
}

FannTrainData read_fann(const std::string& path, const FannOptions& options) {
  const std::string text = detail::read_file_contents(path);
  return parse_fann(text, path, options);
}

}  // namespace lmtrain::io
