// "Did you mean …?" suggestions for misspelt column names.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lmtrain::io::detail {

// Levenshtein distance (insertions, deletions, substitutions each cost 1), O(|a|·|b|) time.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name` by edit distance (ties: the first), if it is near enough to be
// a plausible typo: distance ≤ max(2, |name| / 2).  A case-only difference always qualifies.
std::optional<std::string> closest_name(std::string_view name,
                                        std::span<const std::string> candidates);

}  // namespace lmtrain::io::detail
