#include "closest_name.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace lmtrain::io::detail {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the Wagner–Fischer table: row[j] = distance(a[0, i), b[0, j)).
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_name(std::string_view name,
                                        std::span<const std::string> candidates) {
  const auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& ch : out)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return out;
  };
  const std::string lower_name = lower(name);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    if (lower(candidate) == lower_name) return candidate;
    const std::size_t d = edit_distance(name, candidate);
    if (!best || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  if (best && best_distance <= std::max<std::size_t>(2, name.size() / 2)) return best;
  return std::nullopt;
}

}  // namespace lmtrain::io::detail
