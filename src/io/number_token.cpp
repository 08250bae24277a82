#include "number_token.h"

#include <charconv>
#include <system_error>

namespace lmtrain::io::detail {

NumberToken parse_number(std::string_view token, double& value) {
  if (token.empty()) return NumberToken::kEmpty;
  const char* first = token.data();
  const char* last = token.data() + token.size();
  // from_chars rejects '+', which CSV writers (and FANN files) do emit; "+-1" stays invalid.
  if (*first == '+' && last - first > 1 && first[1] != '-' && first[1] != '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range && ptr == last) return NumberToken::kOutOfRange;
  if (ec != std::errc() || ptr != last) return NumberToken::kNotANumber;
  return NumberToken::kOk;
}

}  // namespace lmtrain::io::detail
