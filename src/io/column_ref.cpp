#include "lmtrain/io/column_ref.h"

#include <fmt/format.h>

#include "closest_name.h"
#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

// The header as a short list for messages: "a", "b", "price" (at most 20 names).
std::string list_names(std::span<const std::string> names) {
  constexpr std::size_t kShown = 20;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i)
    out += fmt::format("{}\"{}\"", i == 0 ? "" : ", ", names[i]);
  if (names.size() > kShown) out += fmt::format(", … ({} more)", names.size() - kShown);
  return out;
}

}  // namespace

std::string ColumnRef::describe() const {
  return is_index() ? fmt::format("index {}", index()) : fmt::format("\"{}\"", name_);
}

std::vector<std::size_t> resolve_columns(std::span<const ColumnRef> refs,
                                         std::span<const std::string> header,
                                         std::size_t field_count, const std::string& source,
                                         std::size_t header_line) {
  const std::string where = header_line > 0 ? fmt::format("{}:{}", source, header_line) : source;
  std::vector<std::size_t> indices;
  indices.reserve(refs.size());
  for (const ColumnRef& ref : refs) {
    std::size_t index = 0;
    if (ref.is_index()) {
      index = ref.index();
      if (index >= field_count)
        throw InvalidArgument(fmt::format(
            "{}: column index {} is out of range: rows have {} fields (indices 0..{}); column "
            "indices are 0-based",
            source, index, field_count, field_count - 1));
    } else {
      if (header.empty())
        throw InvalidArgument(fmt::format(
            "{}: column \"{}\" is selected by name but the file has no header row; select it by "
            "0-based index instead, or add a header line",
            source, ref.name()));
      std::optional<std::size_t> found;
      for (std::size_t i = 0; i < header.size(); ++i) {
        if (header[i] != ref.name()) continue;
        if (found)
          throw InvalidArgument(fmt::format(
              "{}: column name \"{}\" appears twice in the header (indices {} and {}); select "
              "the column by 0-based index or rename one of them",
              where, ref.name(), *found, i));
        found = i;
      }
      if (!found) {
        const auto suggestion = detail::closest_name(ref.name(), header);
        throw InvalidArgument(fmt::format(
            "{}: no column named \"{}\"{}; the header has {}", where, ref.name(),
            suggestion ? fmt::format(" (did you mean \"{}\"?)", *suggestion) : std::string(),
            list_names(header)));
      }
      index = *found;
    }
    for (std::size_t k = 0; k < indices.size(); ++k)
      if (indices[k] == index)
        throw InvalidArgument(
            fmt::format("{}: column {} is selected twice ({} and {}); select each column once",
                        source, index, refs[k].describe(), ref.describe()));
    indices.push_back(index);
  }
  return indices;
}

}  // namespace lmtrain::io
