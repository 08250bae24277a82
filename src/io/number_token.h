// Parsing one number out of a text cell or token, shared by the CSV and FANN readers.
#pragma once

#include <string_view>

namespace lmtrain::io::detail {

enum class NumberToken {
  kOk,          // the whole token is a decimal number (or nan / inf, which the caller vets)
  kEmpty,       // nothing to parse
  kNotANumber,  // characters that are not part of a number
  kOutOfRange,  // a number whose magnitude overflows double, or underflows to zero
};

// Parses the whole of `token` as a double: std::from_chars' general format (the strtod syntax
// in the C locale, without hexadecimal floats) plus an optional leading '+'.  Never consults the
// global locale, so "1.5" parses the same under a German locale.
NumberToken parse_number(std::string_view token, double& value);

}  // namespace lmtrain::io::detail
