// Fuzzes parse_fann.  The first byte chooses the non-finite policy, the rest is the file's text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lmtrain/core/error.h"
#include "lmtrain/io/fann_reader.h"
#include "table_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  using namespace lmtrain::io;
  FannOptions options;
  options.allow_non_finite = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const FannTrainData d = parse_fann(text, "fuzz.train", options);
    fuzzing::check_table(d.inputs, true);
    fuzzing::check_table(d.outputs, true);
    if (d.inputs.rows != d.outputs.rows || d.inputs.source_lines.size() != d.inputs.rows ||
        d.outputs.source_lines.size() != d.outputs.rows)
      std::abort();
  } catch (const lmtrain::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  return 0;
}
