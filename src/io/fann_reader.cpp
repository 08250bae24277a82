#include "lmtrain/io/fann_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

}  // namespace

FannTrainData parse_fann(std::string_view text, const std::string& source,
                         const FannOptions& options) {
  TokenStream tokens(text);
  static constexpr const char* kHeaderNames[] = {"num_data", "num_input", "num_output"};
  std::size_t header[3] = {};
  std::size_t header_line = 1;
  for (int k = 0; k < 3; ++k) {
    std::string_view token;
    std::size_t line = 0;
    if (!tokens.next(token, line))
      throw InvalidArgument(fmt::format(
          "{}:{}: the FANN header ends before {}: a FANN file starts with the three integers "
          "\"num_data num_input num_output\"",
          source, tokens.line(), kHeaderNames[k]));
    if (k == 0) header_line = line;
    std::size_t value = 0;
    bool ok = !token.empty();
    for (char c : token) {
      ok = ok && c >= '0' && c <= '9' && !__builtin_mul_overflow(value, std::size_t{10}, &value) &&
           !__builtin_add_overflow(value, static_cast<std::size_t>(c - '0'), &value);
    }
    if (!ok)
      throw InvalidArgument(fmt::format(
          "{}:{}: line {}: {} in the FANN header is {}, expected a non-negative integer; a FANN "
          "file starts with \"num_data num_input num_output\"",
          source, line, line, kHeaderNames[k], quote_token(token)));
    header[k] = value;
  }
  const std::size_t num_data = header[0], num_input = header[1], num_output = header[2];
  if (num_data == 0 || num_input == 0)
    throw InvalidArgument(
        fmt::format("{}:{}: the FANN header \"{} {} {}\" declares {}; there is nothing to read",
                    source, header_line, num_data, num_input, num_output,
                    num_data == 0 ? "no samples" : "samples without inputs"));
  std::size_t per_sample = 0, promised = 0;
  if (__builtin_add_overflow(num_input, num_output, &per_sample) ||
      __builtin_mul_overflow(num_data, per_sample, &promised))
    throw InvalidArgument(
        fmt::format("{}:{}: the FANN header \"{} {} {}\" is too large to "
                    "address; the header is corrupt",
                    source, header_line, num_data, num_input, num_output));

  FannTrainData result;
  NumericTable* parts[] = {&result.inputs, &result.outputs};
  for (NumericTable* part : parts) {
    part->source = source;
    part->rows = num_data;
    // Reserve for what the text can hold (a number and a separator take at least 2 bytes), not
    // what the header claims: a corrupt header must not allocate terabytes.  No overflow:
    // num_data · cols ≤ promised.
    const std::size_t text_limit = text.size() / 2 + 1;
    const std::size_t cols = part == &result.inputs ? num_input : num_output;
    part->values.reserve(std::min(num_data * cols, text_limit));
    part->source_lines.reserve(std::min(num_data, text_limit));
  }
  result.inputs.cols = num_input;
  result.outputs.cols = num_output;

  const auto promise = [&] {
    return fmt::format(
        "the header (line {}) promises {} samples × ({} inputs + {} outputs) = {} "
        "numbers",
        header_line, num_data, num_input, num_output, promised);
  };
  std::string_view token;
  std::size_t line = 0;
  for (std::size_t i = 0; i < promised; ++i) {
    const std::size_t sample = i / per_sample, position = i % per_sample;
    if (!tokens.next(token, line))
      throw InvalidArgument(fmt::format(
          "{}:{}: the file ends after {} numbers, {}; sample {} (0-based) is {}; fix num_data in "
          "the header or restore the missing lines",
          source, tokens.line(), i, promise(), sample,
          position == 0 ? "missing"
                        : fmt::format("incomplete ({} of {} values)", position, per_sample)));
    double value = 0.0;
    const detail::NumberToken kind = detail::parse_number(token, value);
    const bool is_input = position < num_input;
    const auto where = [&] {
      return fmt::format("{}:{}: line {}: {} {} of {} of sample {} (0-based)", source, line, line,
                         is_input ? "input" : "output",
                         (is_input ? position : position - num_input) + 1,
                         is_input ? num_input : num_output, sample);
    };
    if (kind == detail::NumberToken::kNotANumber)
      throw InvalidArgument(
          fmt::format("{} is {}, expected a number", where(), quote_token(token)));
    if (kind == detail::NumberToken::kOutOfRange)
      throw InvalidArgument(
          fmt::format("{} is {}, outside the range of double", where(), quote_token(token)));
    if (!options.allow_non_finite && !std::isfinite(value))
      throw InvalidArgument(fmt::format(
          "{} is {}, which is not finite; remove or impute the value, or set allow_non_finite to "
          "read it anyway",
          where(), quote_token(token)));
    NumericTable& part = is_input ? result.inputs : result.outputs;
    if (position == 0 || position == num_input) part.source_lines.push_back(line);
    part.values.push_back(value);
  }
  if (tokens.next(token, line)) {
    const std::size_t first_extra_line = line;
    const std::string first_extra = quote_token(token);
    std::size_t extra = 1;
    while (tokens.next(token, line)) ++extra;
    throw InvalidArgument(fmt::format(
        "{}:{}: the file holds {} numbers after the header, {} more than {}; the first extra "
        "value is {} on line {}; fix num_data (or num_input/num_output) in the header",
        source, first_extra_line, promised + extra, extra, promise(), first_extra,
        first_extra_line));
  }
  if (num_output == 0) result.outputs.source_lines = result.inputs.source_lines;
  result.inputs.shape = {num_data, num_input};
  result.outputs.shape = {num_data, num_output};
  return result;
}

FannTrainData read_fann(const std::string& path, const FannOptions& options) {
  const std::string text = detail::read_file_contents(path);
  return parse_fann(text, path, options);
}

}  // namespace lmtrain::io
