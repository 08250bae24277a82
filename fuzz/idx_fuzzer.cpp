// Fuzzes parse_idx.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lmtrain/core/error.h"
#include "lmtrain/io/idx_reader.h"
#include "table_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    lmtrain::io::fuzzing::check_table(lmtrain::io::parse_idx(bytes, "fuzz.idx"), false);
  } catch (const lmtrain::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  return 0;
}
