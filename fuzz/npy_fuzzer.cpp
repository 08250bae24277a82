// Fuzzes parse_npy, and checks that whatever it accepts survives encode_npy → parse_npy
// bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "lmtrain/core/error.h"
#include "lmtrain/io/npy_reader.h"
#include "lmtrain/io/npy_writer.h"
#include "table_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lmtrain::io;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const NumericTable table = parse_npy(bytes, "fuzz.npy");
    fuzzing::check_table(table, false);
    const std::size_t shape[] = {table.rows, table.cols};
    const NumericTable again =
        parse_npy(encode_npy<double>(table.values, shape), "fuzz-roundtrip.npy");
    if (again.values.size() != table.values.size() ||
        std::memcmp(again.values.data(), table.values.data(),
                    table.values.size() * sizeof(double)) != 0)
      std::abort();
  } catch (const lmtrain::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  return 0;
}
