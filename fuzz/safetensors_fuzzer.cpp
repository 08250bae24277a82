// Fuzzes the safetensors container (parse_safetensors) and the model file on top of it
// (parse_model_file).  Whatever either accepts must survive a re-encoding bit for bit:
//   parse → encode → parse gives the same tensors and metadata, and encoding that again gives the
//   same bytes; a model file re-encoded in its own dtype parses to the same parameters.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "lmtrain/core/error.h"
#include "lmtrain/records/model_file.h"
#include "safetensors.h"

namespace {

void check_container(std::string_view bytes) {
  using namespace lmtrain::io::detail;
  const SafetensorsFile file = parse_safetensors(bytes, "fuzz.safetensors");
  for (const SafetensorsTensor& t : file.tensors)
    if (t.bytes.size() != t.num_elements() * element_size(t.dtype)) std::abort();
  const std::string encoded = encode_safetensors(file);
  const SafetensorsFile again = parse_safetensors(encoded, "fuzz-roundtrip.safetensors");
  if (again.metadata != file.metadata || again.tensors.size() != file.tensors.size()) std::abort();
  for (const SafetensorsTensor& t : again.tensors) {
    const SafetensorsTensor* original = file.find(t.name);
    if (!original || original->dtype != t.dtype || original->shape != t.shape ||
        original->bytes != t.bytes)
      std::abort();
  }
  if (encode_safetensors(again) != encoded) std::abort();
}

void check_model(std::string_view bytes) {
  using namespace lmtrain::io;
  const ModelFile model = parse_model_file(bytes, "fuzz.safetensors");
  const std::string encoded = model.parameter_dtype == ParameterDtype::kF32
                                  ? encode_model_file<float>(model)
                                  : encode_model_file<double>(model);
  const ModelFile again = parse_model_file(encoded, "fuzz-roundtrip.safetensors");
  if (again.parameters.size() != model.parameters.size() ||
      std::memcmp(again.parameters.data(), model.parameters.data(),
                  model.parameters.size() * sizeof(double)) != 0 ||
      again.provenance != model.provenance || again.class_names != model.class_names)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    check_container(bytes);
  } catch (const lmtrain::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  try {
    check_model(bytes);
  } catch (const lmtrain::Error&) {
  }
  return 0;
}
