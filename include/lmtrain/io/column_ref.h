// A reference to one column of a tabular file: by header name or by 0-based position.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lmtrain::io {

class ColumnRef {
 public:
  static ColumnRef by_name(std::string name) { return ColumnRef(std::move(name), std::nullopt); }
  static ColumnRef by_index(std::size_t index) { return ColumnRef({}, index); }

  bool is_index() const { return index_.has_value(); }
  const std::string& name() const { return name_; }
  std::size_t index() const { return index_.value_or(0); }
  // "\"price\"" or "index 3", for messages.
  std::string describe() const;

 private:
  ColumnRef(std::string name, std::optional<std::size_t> index)
      : name_(std::move(name)), index_(index) {}
  std::string name_;
  std::optional<std::size_t> index_;
};

// The 0-based positions of `refs` among `field_count` fields named `header` (empty when the
// file has no header row).  Throws InvalidArgument naming `source` for: a name not in the header
// (suggesting the closest header name by edit distance and listing the header), a name that
// appears more than once in the header, a name used on a file without a header, an index
// ≥ field_count, and a column selected twice.  `header_line` (1-based, 0 when unknown) is quoted
// in the messages.
std::vector<std::size_t> resolve_columns(std::span<const ColumnRef> refs,
                                         std::span<const std::string> header,
                                         std::size_t field_count, const std::string& source,
                                         std::size_t header_line);

}  // namespace lmtrain::io
