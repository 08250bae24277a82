#include "lmtrain/io/csv_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <span>
#include <unordered_map>

#include "file_contents.h"
#include "lmtrain/core/error.h"
#include "number_token.h"

namespace lmtrain::io {
namespace {

std::string delimiter_name(char c) {
  switch (c) {
    case '\t':
      return "'\\t' (tab)";
    case ' ':
      return "' ' (space)";
    default:
      return fmt::format("'{}'", c);
  }
}

// A cell as quoted in messages: long cells are cut so that one bad cell cannot flood a log.
std::string quote_cell(std::string_view cell) {
  constexpr std::size_t kShown = 40;
  if (cell.size() <= kShown) return fmt::format("\"{}\"", cell);
  return fmt::format("\"{}…\" ({} characters)", cell.substr(0, kShown), cell.size());
}

// Splits CSV text into records.  A record starts on a line that is neither blank nor a comment
// and ends at the first newline outside quotes; quoted fields may hold the delimiter, newlines
// and doubled quotes ("" for ").  Fields are views into the text, or into `unescaped_` for quoted
// fields whose doubled quotes had to be collapsed.
class RecordScanner {
 public:
  RecordScanner(std::string_view text, const CsvOptions& options, const std::string& source)
      : text_(text), delimiter_(options.delimiter), comment_(options.comment), source_(source) {}

  // Reads the next record into `fields` and the 1-based line it starts on into `line`;
  // false when the text is exhausted.
  bool next(std::vector<std::string_view>& fields, std::size_t& line) {
    fields.clear();
    unescaped_.clear();
    if (!skip_blank_and_comment_lines()) return false;
    line = line_;
    for (;;) {
      skip_padding();
      if (pos_ < text_.size() && text_[pos_] == '"') {
        fields.push_back(quoted_field(fields.size() + 1));
        skip_padding();
        if (pos_ < text_.size() && text_[pos_] != delimiter_ && text_[pos_] != '\n')
          throw InvalidArgument(fmt::format(
              "{}:{}: unexpected '{}' after the closing quote of field {}; a quoted field must be "
              "followed by the delimiter {} or the end of the line (write \"\" for a quote inside "
              "quotes)",
              source_, line_, text_[pos_], fields.size(), delimiter_name(delimiter_)));
      } else {
        const std::size_t start = pos_;
        while (pos_ < text_.size() && text_[pos_] != delimiter_ && text_[pos_] != '\n') ++pos_;
        std::size_t end = pos_;
        while (end > start && is_padding(text_[end - 1])) --end;
        fields.push_back(text_.substr(start, end - start));
      }
      if (pos_ < text_.size() && text_[pos_] == delimiter_) {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size()) {  // at '\n'
        ++pos_;
        ++line_;
      }
      return true;
    }
  }

 private:
  // Spaces, tabs and the '\r' of CRLF surround fields; the delimiter itself never is padding.
  bool is_padding(char c) const { return (c == ' ' || c == '\t' || c == '\r') && c != delimiter_; }
  void skip_padding() {
    while (pos_ < text_.size() && is_padding(text_[pos_])) ++pos_;
  }

  bool skip_blank_and_comment_lines() {
    while (pos_ < text_.size()) {
      std::size_t p = pos_;
      while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\r')) ++p;
      const bool blank = p == text_.size() || text_[p] == '\n';
      const bool comment = !blank && comment_ != '\0' && text_[p] == comment_;
      if (!blank && !comment) return true;
      while (p < text_.size() && text_[p] != '\n') ++p;
      if (p == text_.size()) {
        pos_ = p;
        return false;
      }
      pos_ = p + 1;
      ++line_;
    }
    return false;
  }

  std::string_view quoted_field(std::size_t field_number) {
    const std::size_t open_line = line_;
    ++pos_;  // the opening quote
    const std::size_t start = pos_;
    std::string* collapsed = nullptr;
    for (;;) {
      if (pos_ >= text_.size())
        throw InvalidArgument(fmt::format(
            "{}:{}: the quote opened in field {} on line {} is never closed; close it, or write "
            "\"\" for a quote character inside a quoted field",
            source_, open_line, field_number, open_line));
      const char c = text_[pos_];
      if (c == '"') {
        if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
          if (!collapsed) collapsed = &unescaped_.emplace_back(text_.substr(start, pos_ - start));
          collapsed->push_back('"');
          pos_ += 2;
          continue;
        }
        const std::size_t end = pos_++;
        return collapsed ? std::string_view(*collapsed) : text_.substr(start, end - start);
      }
      if (c == '\n') ++line_;
      if (collapsed) collapsed->push_back(c);
      ++pos_;
    }
  }

  std::string_view text_;
  char delimiter_;
  char comment_;
  const std::string& source_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
  std::deque<std::string> unescaped_;  // a deque: growing it leaves earlier strings in place
};

// Whether a first record is a header: one of its fields is not a number.  `labels`: the field of
// a label column, whose text a data row has too, does not count.
bool looks_like_header(const std::vector<std::string_view>& fields,
                       const std::optional<CsvLabels>& labels) {
  std::size_t skip = fields.size();
  if (labels && !labels->column) skip = fields.size() - 1;
  if (labels && labels->column && labels->column->is_index()) skip = labels->column->index();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i == skip) continue;
    const std::string_view field = fields[i];
    double ignored = 0.0;
    const detail::NumberToken kind = detail::parse_number(field, ignored);
    if (kind == detail::NumberToken::kNotANumber) return true;
  }
  return false;
}

void check_delimiter(const CsvOptions& options, const std::string& source) {
  const char d = options.delimiter;
  if (d == '"' || d == '\n' || d == '\r' || d == '\0' || (d != ' ' && d == options.comment))
    throw InvalidArgument(fmt::format(
        "{}: CSV delimiter {} cannot be used (it is a quote, a line end, NUL or the comment "
        "character); use ',', ';', '\\t', ' ' or '|'",
        source, delimiter_name(d)));
}

// What the first record decides for every row: whether it is a header, and how many fields a
// row has.
struct CsvLayout {
  bool has_header = false;
  std::vector<std::string> header;  // the header's fields; empty without one
  std::size_t field_count = 0;
  std::size_t width_line = 0;  // the header's line, or the first data row's
};

// Reads the first record and, when it is a header, the record after it: `fields` and `line` are
// then the first data row's.
CsvLayout read_layout(RecordScanner& scanner, std::vector<std::string_view>& fields,
                      std::size_t& line, const CsvOptions& options, const std::string& source) {
  if (!scanner.next(fields, line))
    throw InvalidArgument(fmt::format(
        "{}: no data: the file is empty or holds only comments and blank lines", source));
  CsvLayout layout;
  layout.has_header =
      options.header == CsvHeader::kPresent ||
      (options.header == CsvHeader::kAuto && looks_like_header(fields, options.labels));
  layout.field_count = fields.size();
  layout.width_line = line;
  if (!layout.has_header) return layout;
  // A loop rather than assign(): GCC 12's -Wnull-dereference misfires inside
  // vector<string>::assign from string_view iterators at -O3.
  layout.header.reserve(fields.size());
  for (const std::string_view f : fields) layout.header.emplace_back(f);
  if (!scanner.next(fields, line))
    throw InvalidArgument(fmt::format(
        "{}: no data rows: the header on line {} is followed by nothing but comments and blank "
        "lines{}",
        source, layout.width_line,
        options.header == CsvHeader::kAuto
            ? " (the first row was taken as a header because it is not all numbers)"
            : ""));
  return layout;
}

std::vector<std::size_t> selected_columns(const CsvOptions& options, const CsvLayout& layout,
                                          const std::string& source) {
  std::vector<std::size_t> selected(layout.field_count);
  if (options.columns.empty())
    std::iota(selected.begin(), selected.end(), std::size_t{0});
  else
    selected = resolve_columns(options.columns, layout.header, layout.field_count, source,
                               layout.has_header ? layout.width_line : 0);
  return selected;
}

// The data rows' checks against the layout, with messages that name the line, the field and
// (with a header) the column.
class RowReader {
 public:
  RowReader(const CsvLayout& layout, const CsvOptions& options, const std::string& source)
      : layout_(layout), options_(options), source_(source) {}

  void check_width(const std::vector<std::string_view>& fields, std::size_t line) const {
    if (fields.size() == layout_.field_count) return;
    const std::string delimiter = delimiter_name(options_.delimiter);
    throw InvalidArgument(fmt::format(
        "{}:{}: line {} has {} field{}, the {} has {} (line {}); every row needs the same number "
        "of fields: look for a missing or extra delimiter {} or an unquoted {} inside a value",
        source_, line, line, fields.size(), fields.size() == 1 ? "" : "s",
        layout_.has_header ? "header" : "first row", layout_.field_count, layout_.width_line,
        delimiter, delimiter));
  }

  // A one-field row whose cell holds another common separator: the hint to name it.
  std::string other_delimiter(std::string_view cell) const {
    if (layout_.field_count != 1) return {};
    for (const char d : {';', '\t', '|', ','})
      if (d != options_.delimiter && cell.find(d) != std::string_view::npos)
        return fmt::format(
            " (every row has one field: if the file is separated by {}, set "
            "CsvOptions::delimiter to it)",
            delimiter_name(d));
    return {};
  }

  // "data.csv:7: line 7, field 3 of 3 (column "species")".
  std::string where(std::size_t line, std::size_t index) const {
    return fmt::format("{}:{}: line {}, field {} of {}{}", source_, line, line, index + 1,
                       layout_.field_count,
                       layout_.has_header ? fmt::format(" (column \"{}\")", layout_.header[index])
                                          : std::string());
  }

  // Field `index` (0-based) of the row on `line`.
  double cell_value(std::string_view cell, std::size_t line, std::size_t index) const {
    double value = 0.0;
    const auto where = [&] { return this->where(line, index); };
    switch (detail::parse_number(cell, value)) {
      case detail::NumberToken::kOk:
        break;
      case detail::NumberToken::kEmpty:
        throw InvalidArgument(fmt::format(
            "{} is empty, expected a number; fill in the value, drop the row, or leave the "
            "column out with CsvOptions::columns",
            where()));
      case detail::NumberToken::kNotANumber:
        throw InvalidArgument(
            fmt::format("{} is {}, expected a number; fix the cell, or leave the column out with "
                        "CsvOptions::columns{}{}",
                        where(), quote_cell(cell),
                        !layout_.has_header && line == layout_.width_line
                            ? " (if this first row is a header, set CsvOptions::header to kPresent)"
                            : "",
                        other_delimiter(cell)));
      case detail::NumberToken::kOutOfRange:
        throw InvalidArgument(fmt::format(
            "{} is {}, a number outside the range of double (it overflows to ±inf or underflows "
            "to 0); rescale the column",
            where(), quote_cell(cell)));
    }
    if (!options_.allow_non_finite && !std::isfinite(value))
      throw InvalidArgument(fmt::format(
          "{} is {}, which is not finite; remove or impute the value (a NaN or ±Inf in training "
          "data makes every step invalid), or set CsvOptions::allow_non_finite to read it anyway",
          where(), quote_cell(cell)));
    return value;
  }

 private:
  const CsvLayout& layout_;
  const CsvOptions& options_;
  const std::string& source_;
};

// The file field of the label column; nothing without one.
std::optional<std::size_t> label_field(const CsvOptions& options, const CsvLayout& layout,
                                       const std::vector<std::size_t>& selected,
                                       const std::string& source) {
  if (!options.labels) return std::nullopt;
  const std::optional<ColumnRef>& column = options.labels->column;
  const std::size_t field =
      column ? resolve_columns(std::span(&*column, 1), layout.header, layout.field_count, source,
                               layout.has_header ? layout.width_line : 0)[0]
             : layout.field_count - 1;
  if (std::find(selected.begin(), selected.end(), field) == selected.end())
    throw InvalidArgument(
        fmt::format("{}: the label column (field {}) is not among the columns read; add it to "
                    "CsvOptions::columns",
                    source, field + 1));
  return field;
}

bool is_number(std::string_view cell) {
  double ignored = 0.0;
  return detail::parse_number(cell, ignored) == detail::NumberToken::kOk;
}

// Column `col` of `t` (file field `field`) from the label cells, row by row: class indices, or
// the indices of their names (CsvLabels).
void assign_labels(NumericTable& t, std::size_t col, std::size_t field,
                   const std::vector<std::string>& cells, const CsvLabels& labels,
                   const RowReader& reader) {
  const auto text =
      std::find_if(cells.begin(), cells.end(), [](const std::string& c) { return !is_number(c); });
  const bool indices = labels.file_decides ? text == cells.end() : labels.classes.empty();
  if (indices && text != cells.end()) {
    const std::size_t r = static_cast<std::size_t>(text - cells.begin());
    throw InvalidArgument(fmt::format(
        "{} is {}, a class name, but the classes here are indices 0, 1, … (the training data or "
        "the model named none); train on these labels, or write the class's index",
        reader.where(t.source_lines[r], field), quote_cell(*text)));
  }
  if (indices) {
    for (std::size_t r = 0; r < t.rows; ++r)
      t(r, col) = reader.cell_value(cells[r], t.source_lines[r], field);
    return;
  }
  std::vector<std::string> names = labels.classes;
  if (labels.file_decides) {
    names = cells;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  std::unordered_map<std::string_view, std::size_t> index;
  std::vector<double> numbers(names.size(), std::nan(""));  // each name's value, if a number
  for (std::size_t k = 0; k < names.size(); ++k) {
    index.emplace(names[k], k);
    double v = 0.0;
    if (detail::parse_number(names[k], v) == detail::NumberToken::kOk) numbers[k] = v;
  }
  for (std::size_t r = 0; r < t.rows; ++r) {
    const std::string& cell = cells[r];
    if (cell.empty())
      throw InvalidArgument(
          fmt::format("{} is empty, expected a class label; fill in the label or drop the row",
                      reader.where(t.source_lines[r], field)));
    auto found = index.find(cell);
    double v = 0.0;
    if (found == index.end() && detail::parse_number(cell, v) == detail::NumberToken::kOk) {
      const auto same = std::find(numbers.begin(), numbers.end(), v);
      if (same != numbers.end())
        found = index.find(names[static_cast<std::size_t>(same - numbers.begin())]);
    }
    if (found == index.end())
      throw InvalidArgument(fmt::format(
          "{} is {}, which is not one of the {} classes trained on ({}); fix the label, or drop "
          "the row",
          reader.where(t.source_lines[r], field), quote_cell(cell), names.size(),
          fmt::join(names, ", ")));
    t(r, col) = static_cast<double>(found->second);
  }
  t.class_names = std::move(names);
}

}  // namespace

NumericTable parse_csv(std::string_view text, const std::string& source,
                       const CsvOptions& options) {
  check_delimiter(options, source);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 byte-order mark

  RecordScanner scanner(text, options, source);
  std::vector<std::string_view> fields;
  std::size_t line = 0;
  const CsvLayout layout = read_layout(scanner, fields, line, options, source);
  const std::vector<std::size_t> selected = selected_columns(options, layout, source);

  NumericTable table;
  table.source = source;
  table.cols = selected.size();
  if (layout.has_header)
    for (std::size_t index : selected) table.column_names.push_back(layout.header[index]);

  const RowReader reader(layout, options, source);
  const std::optional<std::size_t> label = label_field(options, layout, selected, source);
  std::vector<std::string> label_cells;  // the label column's cells, read once all rows are in
  do {
    reader.check_width(fields, line);
    for (std::size_t index : selected) {
      if (index == label) label_cells.emplace_back(fields[index]);
      table.values.push_back(index == label ? 0.0 : reader.cell_value(fields[index], line, index));
    }
    table.source_lines.push_back(line);
    ++table.rows;
  } while (scanner.next(fields, line));
  if (label) {
    const auto col = static_cast<std::size_t>(std::find(selected.begin(), selected.end(), *label) -
                                              selected.begin());
    assign_labels(table, col, *label, label_cells, *options.labels, reader);
  }

  table.shape = {table.rows, table.cols};
  return table;
}

NumericTable read_csv(const std::string& path, const CsvOptions& options) {
  const std::string text = detail::read_file_contents(path);
  return parse_csv(text, path, options);
}

std::vector<std::string> read_csv_header(const std::string& path, const CsvOptions& options) {
  check_delimiter(options, path);
  // The layout needs the first record and the one after a header: read a prefix of the file, and
  // a larger one while the prefix ends before they do (a failure on a prefix may be its cut; only
  // the whole file's is the file's).
  for (std::size_t prefix = std::size_t{1} << 16;; prefix *= 4) {
    const std::string contents = detail::read_file_contents(path, prefix);
    const bool whole = contents.size() < prefix;
    std::string_view text = contents;
    if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    try {
      RecordScanner scanner(text, options, path);
      std::vector<std::string_view> fields;
      std::size_t line = 0;
      const CsvLayout layout = read_layout(scanner, fields, line, options, path);
      // A first record cut by the prefix might read as data; it is whole once another starts.
      if (whole || layout.has_header || scanner.next(fields, line)) return layout.header;
    } catch (const InvalidArgument&) {
      if (whole) throw;
    }
  }
}

}  // namespace lmtrain::io
