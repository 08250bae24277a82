// Fuzzes parse_csv.  The first byte chooses the options (delimiter, header mode, non-finite
// policy, a column selection, a label column: names from the file or given ones), the rest is
// the file's text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "lmtrain/core/error.h"
#include "lmtrain/io/csv_reader.h"
#include "table_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  using namespace lmtrain::io;
  const std::uint8_t choice = data[0];
  CsvOptions options;
  constexpr char kDelimiters[] = {',', ';', '\t', ' '};
  options.delimiter = kDelimiters[choice & 3];
  options.header = static_cast<CsvHeader>((choice >> 2) % 3);
  options.allow_non_finite = (choice & 0x10) != 0;
  if (choice & 0x20) options.columns = {ColumnRef::by_index(1), ColumnRef::by_index(0)};
  if (choice & 0x40) options.columns = {ColumnRef::by_name("a"), ColumnRef::by_name("b")};
  if (choice & 0x80) {
    options.labels = CsvLabels{};
    if (choice & 0x10) options.labels = CsvLabels{std::nullopt, false, {"x", "2"}};
  }
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const NumericTable table = parse_csv(text, "fuzz.csv", options);
    fuzzing::check_table(table, true);
    // Names: the label column (the last, with every column read) holds indices of them.
    if (!table.class_names.empty() && options.columns.empty())
      for (std::size_t r = 0; r < table.rows; ++r) {
        const double k = table(r, table.cols - 1);
        if (!(k >= 0 && k < static_cast<double>(table.class_names.size()) &&
              k == static_cast<double>(static_cast<std::size_t>(k))))
          std::abort();
      }
  } catch (const lmtrain::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  return 0;
}
