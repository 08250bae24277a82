// model.safetensors: bit-exact round trips of random dense and convolutional models in float and
// double, the exact bytes of a tiny file built by hand, PyTorch naming, atomic writes, and one
// assertion per malformed-file case.
#include "lmtrain/records/model_file.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <vector>

#include "safetensors.h"
#include "scratch_dir.h"

namespace lmtrain::io {
namespace {

using detail::parse_safetensors;
using detail::SafetensorsDtype;
using detail::SafetensorsFile;
using detail::SafetensorsTensor;
using testing::expect_contains;
using testing::invalid_argument_message;
using testing::random_value;
using Json = nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "the expected bytes are built with memcpy in host byte order");

ModelSpec mlp_spec() {
  return ModelSpec(4)
      .dense(7)
      .activation(Activation::kTanh)
      .dense(5)
      .activation(Activation::kRelu)
      .dense(3);
}

// Layers: 0 conv, 1 elu, 2 max_pool, 3 conv (no bias), 4 gelu, 5 avg_pool, 6 flatten, 7 dense,
// 8 sigmoid, 9 dense.  3×10×9 → 4×10×9 → 4×5×4 → 5×2×4 → 5×3×5 = 75 → 6 → 2.
ModelSpec conv_spec() {
  return ModelSpec(ImageShape{3, 10, 9})
      .conv2d(4, 3, 1, 1)
      .activation(Activation::kElu)
      .max_pool2d(2)
      .conv2d(5, Window2d{2, 3, 2, 1, 0, 1}, false)
      .activation(Activation::kGelu)
      .avg_pool2d(Window2d{2, 2, 1, 1, 1, 1})
      .flatten()
      .dense(6)
      .activation(Activation::kSigmoid)
      .dense(2);
}

// A model with random parameters (float-representable when `as_float`), normalization of both
// sides, classification info and provenance.
ModelFile random_model(const ModelSpec& spec, bool as_float, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ModelFile m;
  m.architecture = spec;
  m.parameters.resize(spec.num_params());
  for (double& p : m.parameters) {
    p = random_value(rng);
    if (as_float) p = static_cast<double>(static_cast<float>(p));
  }
  for (std::size_t c = 0; c < spec.inputs(); ++c) {
    m.normalization.inputs.mean.push_back(random_value(rng));
    m.normalization.inputs.scale.push_back(std::abs(random_value(rng)));
  }
  for (std::size_t c = 0; c < spec.outputs(); ++c) {
    m.normalization.targets.mean.push_back(random_value(rng));
    m.normalization.targets.scale.push_back(std::abs(random_value(rng)));
  }
  m.loss = "cross_entropy";
  m.task = Task::kClassification;
  m.num_classes = spec.outputs();
  for (std::size_t k = 0; k < m.num_classes; ++k)
    m.class_names.push_back("class " + std::to_string(k) + " \xe2\x9c\x93");
  m.provenance = make_provenance();
  m.provenance["seed"] = seed;
  m.provenance["epochs"] = 17;
  m.provenance["final_loss"] = random_value(rng);
  m.provenance["termination"] = "gradient tolerance reached";
  return m;
}

void expect_same_model(const ModelFile& a, const ModelFile& b) {
  EXPECT_EQ(model_spec_to_json(a.architecture), model_spec_to_json(b.architecture));
  EXPECT_EQ(a.architecture.describe(), b.architecture.describe());
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  EXPECT_EQ(std::memcmp(a.parameters.data(), b.parameters.data(), a.parameters.size() * 8), 0)
      << "parameters differ in some bit";
  EXPECT_EQ(a.normalization.inputs.mean, b.normalization.inputs.mean);
  EXPECT_EQ(a.normalization.inputs.scale, b.normalization.inputs.scale);
  EXPECT_EQ(a.normalization.targets.mean, b.normalization.targets.mean);
  EXPECT_EQ(a.normalization.targets.scale, b.normalization.targets.scale);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.class_names, b.class_names);
  EXPECT_EQ(a.provenance, b.provenance);
}

class ModelFileTest : public testing::ScratchDir {};

TEST_F(ModelFileTest, RandomDenseAndConvModelsRoundTripBitExactly) {
  for (const ModelSpec& spec : {mlp_spec(), conv_spec()}) {
    for (bool as_float : {false, true}) {
      SCOPED_TRACE(spec.describe() + (as_float ? " float" : " double"));
      const ModelFile m = random_model(spec, as_float, as_float ? 11 : 12);
      const std::string p = path("model.safetensors");
      if (as_float) {
        write_model_file<float>(p, m);
      } else {
        write_model_file(p, m, ParameterDtype::kF64);
      }
      const ModelFile back = read_model_file(p);
      EXPECT_EQ(back.parameter_dtype, as_float ? ParameterDtype::kF32 : ParameterDtype::kF64);
      expect_same_model(back, m);
      EXPECT_EQ(back.provenance["lmtrain_version"], std::string(lmtrain_version()));
      // Writing what was read reproduces the file byte for byte.
      EXPECT_EQ(as_float ? encode_model_file<float>(back) : encode_model_file<double>(back),
                ScratchDir::read_all(p));
    }
  }
}

TEST_F(ModelFileTest, TensorsHavePyTorchSequentialNamesShapesAndTheFlatOrder) {
  const ModelFile m = random_model(conv_spec(), false, 5);
  const SafetensorsFile file = parse_safetensors(encode_model_file<float>(m), "conv");
  struct Expected {
    const char* name;
    std::vector<std::size_t> shape;
  };
  const std::vector<Expected> expected = {{"0.weight", {4, 3, 3, 3}},
                                          {"0.bias", {4}},
                                          {"3.weight", {5, 4, 2, 3}},
                                          {"7.weight", {6, 75}},
                                          {"7.bias", {6}},
                                          {"9.weight", {2, 6}},
                                          {"9.bias", {2}}};
  // Normalization (F64) is laid out first, then the F32 parameters in flat order.
  ASSERT_EQ(file.tensors.size(), expected.size() + 4);
  EXPECT_EQ(file.tensors[0].name, "normalization.input_mean");
  EXPECT_EQ(file.tensors[0].shape, std::vector<std::size_t>{270});
  EXPECT_EQ(file.tensors[3].name, "normalization.target_std");
  std::size_t offset = 0;
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const SafetensorsTensor& t = file.tensors[4 + k];
    EXPECT_EQ(t.name, expected[k].name);
    EXPECT_EQ(t.shape, expected[k].shape);
    EXPECT_EQ(t.dtype, SafetensorsDtype::kF32);
    const std::vector<double> values = detail::tensor_values(t, "conv");
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(values[i], static_cast<double>(static_cast<float>(m.parameters[offset + i])))
          << t.name << "[" << i << "]";
    offset += values.size();
  }
  EXPECT_EQ(offset, m.parameters.size());

  // parameter_tensors agrees with ModelSpec::layer_params, layer by layer.
  const ModelSpec spec = conv_spec();
  std::vector<std::size_t> per_layer(spec.layers().size(), 0);
  std::size_t next = 0;
  for (const ParameterTensor& p : parameter_tensors(spec)) {
    EXPECT_EQ(p.offset, next);
    next += p.count;
    per_layer[p.layer] += p.count;
  }
  for (std::size_t i = 0; i < per_layer.size(); ++i) EXPECT_EQ(per_layer[i], spec.layer_params(i));
  EXPECT_EQ(file.metadata.at("format"), "pt");
}

TEST_F(ModelFileTest, BytesOfATinyModelMatchAnIndependentlyBuiltFile) {
  ModelFile m;
  m.architecture = ModelSpec(1).dense(1);
  m.parameters = {0.5, -0.25};
  m.normalization.inputs.mean = {2.0};
  m.normalization.inputs.scale = {4.0};
  m.provenance = Json::object({{"seed", 3}});
  const std::string bytes = encode_model_file<float>(m);

  const std::string version(lmtrain_version());
  std::string header =
      R"({"__metadata__":{"format":"pt",)"
      R"("lmtrain.architecture":"{\"input_shape\":[1,1,1],\"layers\":[{\"type\":\"dense\",\"units\":1}]}",)"
      R"("lmtrain.format_version":"1","lmtrain.loss":"mse","lmtrain.num_classes":"0",)"
      R"("lmtrain.provenance":"{\"lmtrain_version\":\")" +
      version +
      R"(\",\"seed\":3}","lmtrain.task":"regression"},)"
      R"("normalization.input_mean":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
      R"("normalization.input_std":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
      R"("0.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[16,20]},)"
      R"("0.bias":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})";
  while (header.size() % 8 != 0) header += ' ';
  std::string expected;
  for (int i = 0; i < 8; ++i)
    expected.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  expected += header;
  const double norm[] = {2.0, 4.0};
  const float params[] = {0.5f, -0.25f};
  expected.append(reinterpret_cast<const char*>(norm), sizeof norm);
  expected.append(reinterpret_cast<const char*>(params), sizeof params);
  EXPECT_EQ(bytes, expected);

  const ModelFile back = parse_model_file(bytes, "tiny");
  EXPECT_EQ(back.parameters, m.parameters);
  EXPECT_EQ(back.parameter_dtype, ParameterDtype::kF32);
  EXPECT_FALSE(back.normalization.normalizes_targets());
}

TEST_F(ModelFileTest, WritesAtomicallyAndRefusesAnInconsistentModel) {
  const std::string p = path("model.safetensors");
  const ModelFile good = random_model(mlp_spec(), false, 1);
  write_model_file<double>(p, good);
  const std::string before = ScratchDir::read_all(p);

  ModelFile bad = good;
  bad.parameters.pop_back();
  expect_contains(invalid_argument_message([&] { write_model_file<double>(p, bad); }),
                  {"write_model_file", "92 parameters given", "4-7-5-3", "has 93"});
  EXPECT_EQ(ScratchDir::read_all(p), before) << "a refused write must leave the old file";

  write_model_file<float>(p, random_model(mlp_spec(), true, 2));  // replaces it
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "model.safetensors") << "no temporary file may remain";
  }
  EXPECT_EQ(files, 1u);
  EXPECT_EQ(read_model_file(p).parameter_dtype, ParameterDtype::kF32);

  expect_contains(
      [&] {
        try {
          write_model_file<double>(path("missing/dir/model.safetensors"), good);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      {"missing/dir/model.safetensors", "No such file"});
}

TEST_F(ModelFileTest, WriterValidatesEveryField) {
  const ModelFile good = random_model(mlp_spec(), false, 3);
  const auto error = [&](const std::function<void(ModelFile&)>& change) {
    ModelFile m = good;
    change(m);
    return invalid_argument_message([&] { (void)encode_model_file<double>(m); });
  };
  expect_contains(error([](ModelFile& m) { m.normalization.inputs.scale[2] = 0.0; }),
                  {"normalization.input_std[2] = 0", "std > 0"});
  expect_contains(error([](ModelFile& m) { m.normalization.targets.mean[0] = std::nan(""); }),
                  {"normalization.target_mean[0]", "not finite"});
  expect_contains(error([](ModelFile& m) { m.normalization.targets.scale.clear(); }),
                  {"normalization.target_mean has 3 and normalization.target_std 0 values",
                   "one value per output (3)"});
  expect_contains(error([](ModelFile& m) { m.loss = "hinge"; }),
                  {"loss \"hinge\" is not known", "mse", "cross_entropy"});
  expect_contains(error([](ModelFile& m) {
                    m.num_classes = 4;
                    m.class_names.clear();
                  }),
                  {"4 classes", "3 outputs"});
  expect_contains(error([](ModelFile& m) { m.class_names.pop_back(); }),
                  {"2 class names for num_classes = 3"});
  expect_contains(error([](ModelFile& m) { m.task = Task::kRegression; }),
                  {"task regression has num_classes = 3"});
  expect_contains(error([](ModelFile& m) { m.provenance = Json::array({1}); }),
                  {"provenance is [1]", "JSON object"});
  expect_contains(error([](ModelFile& m) { m.architecture = ModelSpec(4).dense(0); }),
                  {"write_model_file", "units = 0"});
  expect_contains(error([](ModelFile& m) { m.class_names[0].assign(1, static_cast<char>(0xff)); }),
                  {"not UTF-8"});
}

// ---- reading malformed model files --------------------------------------------------------------

class MalformedModelFileTest : public ModelFileTest {
 protected:
  // The message of reading the file `good` becomes after `change` edits its container.
  std::string error(const std::function<void(SafetensorsFile&)>& change) {
    SafetensorsFile file = parse_safetensors(encode_model_file<double>(good_), "good");
    change(file);
    const std::string bytes = detail::encode_safetensors(file);
    return invalid_argument_message([&] { (void)parse_model_file(bytes, "bad.safetensors"); });
  }
  std::string architecture_error(const std::string& json) {
    return error([&](SafetensorsFile& f) { f.metadata["lmtrain.architecture"] = json; });
  }
  static SafetensorsTensor& tensor(SafetensorsFile& f, std::string_view name) {
    for (auto& t : f.tensors)
      if (t.name == name) return t;
    throw std::logic_error("no tensor " + std::string(name));
  }
  static void erase(SafetensorsFile& f, std::string_view name) {
    std::erase_if(f.tensors, [&](const SafetensorsTensor& t) { return t.name == name; });
  }

  ModelFile good_ = random_model(mlp_spec(), false, 4);
};

TEST_F(MalformedModelFileTest, ContainerErrorsNameTheFile) {
  const std::string p = path("model.safetensors");
  write_model_file<double>(p, good_);
  std::string bytes = ScratchDir::read_all(p);
  bytes.resize(bytes.size() - 5);
  const std::string truncated = ScratchDir::write("truncated.safetensors", bytes);
  expect_contains(invalid_argument_message([&] { (void)read_model_file(truncated); }),
                  {truncated, "past the end", "truncated file?"});
  expect_contains(invalid_argument_message([&] { (void)read_model_file(path("none")); }),
                  {"cannot open", "none"});
}

TEST_F(MalformedModelFileTest, AFileNotWrittenByLmtrain) {
  expect_contains(error([](SafetensorsFile& f) { f.metadata.clear(); }),
                  {"\"bad.safetensors\" is not a valid lmtrain model file",
                   "no \"lmtrain.architecture\" metadata", "0.weight"});
}

TEST_F(MalformedModelFileTest, MissingOrBadMetadata) {
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.format_version"] = "2"; }),
                  {"\"lmtrain.format_version\" is \"2\"", "reads format version 1"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata.erase("lmtrain.loss"); }),
                  {"metadata \"lmtrain.loss\" is missing"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.loss"] = "hinge"; }),
                  {"\"bad.safetensors\"", "loss \"hinge\" is not known"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.task"] = "ranking"; }),
                  {"\"lmtrain.task\" is \"ranking\"", "\"regression\" or \"classification\""});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.num_classes"] = "three"; }),
                  {"\"lmtrain.num_classes\" is \"three\"", "decimal integer"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.num_classes"] = "5"; }),
                  {"5 classes", "3 outputs"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.class_names"] = "[1, 2]"; }),
                  {"\"lmtrain.class_names\"[0] is 1", "expected a string"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.class_names"] = "{\"a\""; }),
                  {"\"lmtrain.class_names\" is not valid JSON"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.class_names"] = "[\"a\"]"; }),
                  {"1 class names for num_classes = 3"});
  expect_contains(error([](SafetensorsFile& f) { f.metadata["lmtrain.provenance"] = "42"; }),
                  {"\"lmtrain.provenance\" is 42", "JSON object"});
}

TEST_F(MalformedModelFileTest, ArchitectureErrorsNameTheField) {
  expect_contains(architecture_error("{\"input_shape\": [4]"),
                  {"metadata \"lmtrain.architecture\" is not valid JSON"});
  expect_contains(architecture_error("[]"), {"expected an object with \"input_shape\""});
  expect_contains(architecture_error(R"({"input_shape":[4]})"),
                  {"metadata \"lmtrain.architecture\"", "top level: \"layers\" is missing"});
  expect_contains(architecture_error(R"({"input_shape":[4],"layers":[],"extra":1})"),
                  {"top level: unknown key \"extra\""});
  expect_contains(architecture_error(R"({"input_shape":[0,2,2],"layers":[]})"),
                  {"input_shape[0] (channels)", "expected a positive integer", "got 0"});
  expect_contains(architecture_error(R"({"input_shape":[1,2],"layers":[]})"),
                  {"input_shape: expected [channels, height, width] or [features]"});
  expect_contains(
      architecture_error(R"({"input_shape":[4],"layers":[{"type":"dense","units":"7"}]})"),
      {"layers[0] (dense).units", "expected a positive integer", "got \"7\""});
  expect_contains(architecture_error(R"({"input_shape":[4],"layers":[{"type":"dense","unit":7}]})"),
                  {"layers[0] (dense): unknown key \"unit\""});
  expect_contains(architecture_error(R"({"input_shape":[4],"layers":[{"type":"dense"}]})"),
                  {"layers[0] (dense): \"units\" is missing"});
  expect_contains(architecture_error(R"({"input_shape":[4],"layers":[{"type":"lstm"}]})"),
                  {"layers[0] (lstm).type", "\"lstm\" is not a layer type", "\"conv2d\""});
  expect_contains(architecture_error(R"({"input_shape":[4],"layers":[{"units":3}]})"),
                  {"layers[0]: \"type\" is missing"});
  expect_contains(architecture_error(R"({"input_shape":[4],"layers":[5]})"),
                  {"layers[0]: expected an object"});
  expect_contains(
      architecture_error(
          R"({"input_shape":[4],"layers":[{"type":"activation","activation":"swish"}]})"),
      {"layers[0] (activation).activation", "\"swish\" is not an activation", "tanh"});
  expect_contains(
      architecture_error(
          R"({"input_shape":[1,5,5],"layers":[{"type":"conv2d","out_channels":2,"kernel":[3]}]})"),
      {"layers[0] (conv2d).kernel", "expected [height, width] or one integer"});
  expect_contains(
      architecture_error(
          R"({"input_shape":[1,5,5],"layers":[{"type":"conv2d","out_channels":2,"kernel":3,"padding":[0,-1]}]})"),
      {"layers[0] (conv2d).padding[1]", "non-negative"});
  expect_contains(
      architecture_error(
          R"({"input_shape":[1,5,5],"layers":[{"type":"conv2d","out_channels":2,"kernel":3,"bias":"yes"}]})"),
      {"layers[0] (conv2d).bias", "true or false"});
  expect_contains(
      architecture_error(
          R"({"input_shape":[1,5,5],"layers":[{"type":"max_pool2d","kernel":2,"stride":0}]})"),
      {"layers[0] (max_pool2d).stride", "positive"});
  expect_contains(
      architecture_error(R"({"input_shape":[1,5,5],"layers":[{"type":"dense","units":3}]})"),
      {"metadata \"lmtrain.architecture\"", "layer 0 (dense) receives a 1×5×5 image",
       "insert flatten()"});
  expect_contains(
      architecture_error(R"({"input_shape":[4],"layers":[{"type":"dense","units":4294967296}]})"),
      {"layers[0] (dense).units", "≤ 2147483647"});
}

TEST_F(MalformedModelFileTest, ParameterTensorsThatDisagreeWithTheArchitecture) {
  expect_contains(
      error([](SafetensorsFile& f) { erase(f, "2.bias"); }),
      {"tensor \"2.bias\" of layer 2 (dense 7 → 5) is missing", "expected shape [5] (5 values)"});
  expect_contains(error([](SafetensorsFile& f) {
                    SafetensorsTensor& t = tensor(f, "0.weight");
                    t.shape = {7, 3};
                    t.bytes.resize(7 * 3 * 8);
                  }),
                  {"\"bad.safetensors\"", "tensor \"0.weight\" has shape [7, 3] (21 values)",
                   "layer 0 (dense 4 → 7) needs [7, 4] (28 values)",
                   "parameter count in the tensors disagrees with the architecture"});
  expect_contains(error([](SafetensorsFile& f) {
                    f.tensors.push_back(tensor(f, "2.bias"));
                    f.tensors.back().name = "1.weight";
                  }),
                  {"tensor \"1.weight\" (shape [5]) is unexpected",
                   "layer 1 (tanh) has no such parameter", "disagrees with the architecture"});
  expect_contains(error([](SafetensorsFile& f) {
                    f.tensors.push_back(tensor(f, "2.bias"));
                    f.tensors.back().name = "9.bias";
                  }),
                  {"tensor \"9.bias\"", "the architecture has only 5 layers"});
  expect_contains(error([](SafetensorsFile& f) {
                    f.tensors.push_back(tensor(f, "2.bias"));
                    f.tensors.back().name = "optimizer.state";
                  }),
                  {"tensor \"optimizer.state\"", "neither a parameter of the architecture"});
  expect_contains(error([](SafetensorsFile& f) {
                    SafetensorsTensor& t = tensor(f, "2.weight");
                    const std::vector<double> v = detail::tensor_values(t, "x");
                    const std::vector<float> fv(v.begin(), v.end());
                    t = SafetensorsTensor::from_values<float>(t.name, t.shape,
                                                              std::span<const float>(fv));
                  }),
                  {"tensor \"2.weight\" is F32 but \"0.weight\" is F64", "one dtype"});
  expect_contains(error([](SafetensorsFile& f) {
                    SafetensorsTensor& t = tensor(f, "0.bias");
                    t.dtype = SafetensorsDtype::kI32;
                    t.bytes.resize(t.bytes.size() / 2);
                  }),
                  {"tensor \"0.bias\" has dtype I32", "parameters are F32 or F64"});
}

TEST_F(MalformedModelFileTest, ConvolutionWithoutBiasHasNoBiasTensor) {
  good_ = random_model(conv_spec(), false, 6);
  expect_contains(error([](SafetensorsFile& f) {
                    f.tensors.push_back(tensor(f, "0.bias"));
                    f.tensors.back().name = "3.bias";
                  }),
                  {"tensor \"3.bias\"",
                   "layer 3 (conv2d 4 → 5 channels, kernel 2×3, no bias) has no such parameter"});
  expect_contains(error([](SafetensorsFile& f) {
                    SafetensorsTensor& t = tensor(f, "3.weight");
                    t.shape = {5, 4, 3, 2};
                  }),
                  {"tensor \"3.weight\" has shape [5, 4, 3, 2]", "needs [5, 4, 2, 3]"});
}

TEST_F(MalformedModelFileTest, NormalizationTensors) {
  expect_contains(error([](SafetensorsFile& f) { erase(f, "normalization.input_std"); }),
                  {"normalization.input_mean has 4 and normalization.input_std 0 values"});
  expect_contains(error([](SafetensorsFile& f) {
                    SafetensorsTensor& t = tensor(f, "normalization.input_mean");
                    t.shape = {3};
                    t.bytes.resize(24);
                  }),
                  {"normalization.input_mean has 3", "one value per input (4)"});
  expect_contains(error([](SafetensorsFile& f) {
                    SafetensorsTensor& t = tensor(f, "normalization.target_std");
                    const double v[] = {1.0, -2.0, 3.0};
                    t = SafetensorsTensor::from_values<double>(t.name, {3},
                                                               std::span<const double>(v));
                  }),
                  {"normalization.target_std[1] = -2", "std > 0"});
  expect_contains(error([](SafetensorsFile& f) {
                    tensor(f, "normalization.target_mean").shape = {1, 3};
                  }),
                  {"tensor \"normalization.target_mean\" has shape [1, 3]", "one dimension"});
}

// ---- architecture JSON, normalization, provenance -----------------------------------------------

TEST_F(ModelFileTest, ArchitectureJsonRoundTripsEveryLayerKind) {
  for (const ModelSpec& spec :
       {mlp_spec(), conv_spec(), ModelSpec::mlp(1, {20}, 1, Activation::kSin)}) {
    const Json json = model_spec_to_json(spec);
    const ModelSpec back = model_spec_from_json(Json::parse(json.dump()));
    EXPECT_EQ(model_spec_to_json(back), json);
    EXPECT_EQ(back.describe(), spec.describe());
    ASSERT_EQ(back.layers().size(), spec.layers().size());
    for (std::size_t i = 0; i < spec.layers().size(); ++i) {
      EXPECT_EQ(back.layers()[i].kind, spec.layers()[i].kind);
      EXPECT_EQ(back.layers()[i].window, spec.layers()[i].window);
      EXPECT_EQ(back.layers()[i].bias, spec.layers()[i].bias);
    }
  }
  // One integer stands for [h, w]; pooling's stride defaults to its kernel, as in PyTorch.
  const ModelSpec s = model_spec_from_json(Json::parse(
      R"({"input_shape":[2,8,8],"layers":[{"type":"conv2d","out_channels":3,"kernel":3},)"
      R"({"type":"max_pool2d","kernel":2},{"type":"flatten"},{"type":"dense","units":1}]})"));
  EXPECT_EQ(s.layers()[0].window, Window2d::square(3, 1, 0));
  EXPECT_TRUE(s.layers()[0].bias);
  EXPECT_EQ(s.layers()[1].window, Window2d::square(2, 2, 0));
  EXPECT_EQ(s.outputs(), 1u);
  EXPECT_EQ(s.num_params(), 3u * 2 * 9 + 3 + 27 + 1);
}

TEST_F(ModelFileTest, NormalizationHelpersStandardizeInputsAndRestoreTargets) {
  Normalization n;
  n.inputs.mean = {1.0, -2.0};
  n.inputs.scale = {0.5, 4.0};
  n.targets.mean = {10.0, 20.0};
  n.targets.scale = {2.0, 0.25};
  std::vector<double> x = {2.0, 2.0, 0.0, -6.0, 1.5, 0.0};
  apply_input_normalization<double>(n, x);
  EXPECT_EQ(x, (std::vector<double>{2.0, 1.0, -2.0, -1.0, 1.0, 0.5}));
  std::vector<float> y = {1.0f, 4.0f, -0.5f, 0.0f};
  undo_target_normalization<float>(n, y);
  EXPECT_EQ(y, (std::vector<float>{12.0f, 21.0f, 9.0f, 20.0f}));

  std::mt19937_64 rng(9);
  std::vector<double> z(40), original;
  for (double& v : z) v = random_value(rng);
  original = z;
  Normalization same;  // target = input statistics: undo(apply(z)) ≈ z
  same.targets = n.inputs;
  same.inputs = n.inputs;
  apply_input_normalization<double>(same, z);
  undo_target_normalization<double>(same, z);
  for (std::size_t i = 0; i < z.size(); ++i)
    EXPECT_NEAR(z[i], original[i], 1e-15 * std::abs(original[i]) + 1e-7);

  Normalization none;
  std::vector<double> untouched = original;
  apply_input_normalization<double>(none, untouched);
  undo_target_normalization<double>(none, untouched);
  EXPECT_EQ(untouched, original);

  std::vector<double> odd(3);
  expect_contains(
      invalid_argument_message([&] { apply_input_normalization<double>(n, odd); }),
      {"Standardization::apply", "3 values are not whole rows of the standardization's 2 columns"});
}

// The output link against closed forms: softmax rows of logits log(1), log(2), log(3) (+ an
// offset of 1000, which a softmax without its max shift overflows) are 1/6, 2/6, 3/6; bce's
// sigmoid of log 3 is 3/4, of ±800 exactly 1 and 0 (no NaN); a regression keeps its outputs.
TEST_F(ModelFileTest, OutputLinkGivesClassProbabilitiesAndBceSigmoids) {
  ModelFile classifier = random_model(mlp_spec(), false, 3);
  std::vector<double> z = {0.0,
                           std::log(2.0),
                           std::log(3.0),
                           1000.0,
                           1000.0 + std::log(2.0),
                           1000.0 + std::log(3.0),
                           -std::log(3.0),
                           -std::log(3.0),
                           -std::log(3.0)};
  // Row 2's logits are 1000 + log k rounded: its probabilities are those of the exact
  // differences z − 1000 (Sterbenz), not 1/6, 2/6, 3/6.
  double row2 = 0;
  for (std::size_t k = 3; k < 6; ++k) row2 += std::exp(z[k] - 1000.0);
  std::vector<double> expected = {1.0 / 6, 2.0 / 6, 3.0 / 6, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  for (std::size_t k = 3; k < 6; ++k) expected[k] = std::exp(z[k] - 1000.0) / row2;
  EXPECT_TRUE(apply_output_link(classifier, z));
  // 1e-15: ~9 ulps of 0.5 for the exps, the sum of three and the divide.
  for (std::size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(z[i], expected[i], 1e-15) << i;
  EXPECT_NEAR(expected[3], 1.0 / 6, 1e-13);  // the rounding of 1000 + log k: ulp(1000) ≈ 1.1e-13

  ModelFile regression = classifier;
  regression.task = Task::kRegression;
  regression.num_classes = 0;
  regression.class_names.clear();
  regression.loss = "mse";
  std::vector<double> y = {-800.0, 0.0, std::log(3.0), 800.0, 1.5, -2.5};
  const std::vector<double> outputs = y;
  EXPECT_FALSE(apply_output_link(regression, y));
  EXPECT_EQ(y, outputs);

  ModelFile bce = regression;
  bce.loss = "bce";
  EXPECT_TRUE(apply_output_link(bce, y));
  EXPECT_GE(y[0], 0.0);
  EXPECT_LT(y[0], 1e-300);
  EXPECT_EQ(y[1], 0.5);
  // 4 ulps of 0.75: exp, the add and the divide each round once (libm's exp to ≤ 1 ulp).
  constexpr double kFewUlps = 4 * 0x1p-53;
  EXPECT_NEAR(y[2], 0.75, kFewUlps);
  EXPECT_EQ(y[3], 1.0);
  EXPECT_NEAR(y[4], 1.0 / (1.0 + std::exp(-1.5)), kFewUlps);

  std::vector<double> ragged(4);
  expect_contains(invalid_argument_message([&] { apply_output_link(bce, ragged); }),
                  {"4 values are not whole rows of 3"});
}

TEST_F(ModelFileTest, ProvenanceCarriesTheVersionAndAUtcDate) {
  EXPECT_EQ(lmtrain_version(), LMTRAIN_TEST_PROJECT_VERSION);
  EXPECT_EQ(utc_iso8601(std::chrono::system_clock::from_time_t(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_iso8601(std::chrono::system_clock::from_time_t(1700000000)),
            "2023-11-14T22:13:20Z");
  const Json p = make_provenance(std::chrono::system_clock::from_time_t(1700000000));
  EXPECT_EQ(p, Json::parse(R"({"lmtrain_version":")" + std::string(LMTRAIN_TEST_PROJECT_VERSION) +
                           R"(","date":"2023-11-14T22:13:20Z"})"));
}

}  // namespace
}  // namespace lmtrain::io
