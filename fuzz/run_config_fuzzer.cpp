// libFuzzer target of the run-configuration reader (TOML through toml++ and lmtrain's schema):
// any input must either give a RunConfig or throw lmtrain::Error — never crash, hang or throw
// anything else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/run_config.h"
#include "lmtrain/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const lmtrain::cli::RunConfig config = lmtrain::cli::parse_run_config(text, "/fuzz/run.toml");
    (void)config.model_spec(3).num_params();
  } catch (const lmtrain::Error&) {
  }
  return 0;
}
