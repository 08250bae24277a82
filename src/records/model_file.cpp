#include "lmtrain/records/model_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>
#include <set>

#include "lmtrain/core/error.h"
#include "lmtrain/core/loss_kind.h"
#include "lmtrain/io/atomic_write.h"
#include "safetensors.h"

#ifndef LMTRAIN_VERSION_STRING
#error "LMTRAIN_VERSION_STRING (the CMake project version) must be defined for model_file.cpp"
#endif

namespace lmtrain::io {
namespace {

using Json = nlohmann::json;
using detail::SafetensorsDtype;
using detail::SafetensorsFile;
using detail::SafetensorsTensor;

constexpr std::string_view kFormatVersion = "1";
constexpr std::string_view kInputMean = "normalization.input_mean";
constexpr std::string_view kInputStd = "normalization.input_std";
constexpr std::string_view kTargetMean = "normalization.target_mean";
constexpr std::string_view kTargetStd = "normalization.target_std";
// Integer fields of the architecture are capped so that no product of sizes can overflow before
// ModelSpec::validate and parameter_tensors look at them.
constexpr std::uint64_t kMaxSize = std::numeric_limits<std::int32_t>::max();

std::string shape_text(const std::vector<std::size_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string json_excerpt(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// ---- architecture JSON
// ---------------------------------------------------------------------------

[[noreturn]] void bad_field(const std::string& field, const std::string& what) {
  throw InvalidArgument(fmt::format("architecture: {}: {}", field, what));
}

std::size_t size_field(const Json& value, const std::string& field, bool zero_allowed) {
  if (!value.is_number_unsigned() || value.get<std::uint64_t>() > kMaxSize ||
      (!zero_allowed && value.get<std::uint64_t>() == 0))
    bad_field(field, fmt::format("expected {} integer ≤ {}, got {}",
                                 zero_allowed ? "a non-negative" : "a positive", kMaxSize,
                                 json_excerpt(value)));
  return static_cast<std::size_t>(value.get<std::uint64_t>());
}

// [h, w] or one integer for both.
std::pair<std::size_t, std::size_t> pair_field(const Json& value, const std::string& field,
                                               bool zero_allowed) {
  if (value.is_array()) {
    if (value.size() != 2)
      bad_field(field, fmt::format("expected [height, width] or one integer, got {}",
                                   json_excerpt(value)));
    return {size_field(value[0], field + "[0]", zero_allowed),
            size_field(value[1], field + "[1]", zero_allowed)};
  }
  const std::size_t v = size_field(value, field, zero_allowed);
  return {v, v};
}

void check_keys(const Json& object, const std::string& field,
                std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known)
      bad_field(field,
                fmt::format("unknown key \"{}\"; expected only {}", key, fmt::join(allowed, ", ")));
  }
}

const Json& required(const Json& object, const std::string& field, const char* key) {
  if (!object.contains(key)) bad_field(field, fmt::format("\"{}\" is missing", key));
  return object[key];
}

Window2d window_field(const Json& layer, const std::string& field, bool default_stride_kernel) {
  Window2d w;
  std::tie(w.kernel_h, w.kernel_w) =
      pair_field(required(layer, field, "kernel"), field + ".kernel", false);
  if (layer.contains("stride")) {
    std::tie(w.stride_h, w.stride_w) = pair_field(layer["stride"], field + ".stride", false);
  } else if (default_stride_kernel) {  // PyTorch's pooling default
    w.stride_h = w.kernel_h;
    w.stride_w = w.kernel_w;
  }
  if (layer.contains("padding"))
    std::tie(w.pad_h, w.pad_w) = pair_field(layer["padding"], field + ".padding", true);
  return w;
}

Json pair_json(std::size_t h, std::size_t w) {
  return Json::array({h, w});
}

// ---- tensors ---------------------------------------------------------------------------------

// "layer 2 (dense 20 → 10)": what a message needs to find the layer in a config.
std::string layer_label(const ModelSpec& spec, std::size_t i) {
  const LayerSpec& l = spec.layers()[i];
  const auto shapes = spec.output_shapes();
  const ImageShape& in = i == 0 ? spec.input_shape() : shapes[i - 1];
  switch (l.kind) {
    case LayerSpec::Kind::kDense:
      return fmt::format("layer {} (dense {} → {})", i, in.size(), l.units);
    case LayerSpec::Kind::kConv2d:
      return fmt::format("layer {} (conv2d {} → {} channels, kernel {}×{}{})", i, in.channels,
                         l.channels, l.window.kernel_h, l.window.kernel_w,
                         l.bias ? "" : ", no bias");
    case LayerSpec::Kind::kActivation:
      return fmt::format("layer {} ({})", i, to_string(l.activation));
    default:
      return fmt::format("layer {} ({})", i, to_string(l.kind));
  }
}

std::size_t checked_product(const std::vector<std::size_t>& shape, const ModelSpec& spec,
                            std::size_t layer) {
  std::size_t n = 1;
  for (std::size_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw InvalidArgument(fmt::format("model: {} has more parameters than 64 bits count",
                                        layer_label(spec, layer)));
  return n;
}

std::optional<std::size_t> parse_decimal(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::size_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  return v;
}

void check_normalization_pair(const std::vector<double>& mean, const std::vector<double>& stddev,
                              std::size_t expected, const char* side, const char* count_name,
                              const std::string& context) {
  if (mean.empty() && stddev.empty()) return;
  if (mean.size() != expected || stddev.size() != expected)
    throw InvalidArgument(fmt::format(
        "{}: normalization.{}_mean has {} and normalization.{}_std {} values; expected both "
        "empty or both with one value per {} ({})",
        context, side, mean.size(), side, stddev.size(), count_name, expected));
  for (std::size_t c = 0; c < expected; ++c) {
    if (!std::isfinite(mean[c]))
      throw InvalidArgument(fmt::format("{}: normalization.{}_mean[{}] = {} is not finite", context,
                                        side, c, mean[c]));
    if (!(stddev[c] > 0.0) || !std::isfinite(stddev[c]))
      throw InvalidArgument(fmt::format(
          "{}: normalization.{}_std[{}] = {}; expected a finite std > 0 (a constant column "
          "has std 0: drop it or give it std 1)",
          context, side, c, stddev[c]));
  }
}

// ---- reading ---------------------------------------------------------------------------------

class ModelFileParser {
 public:
  ModelFileParser(SafetensorsFile file, std::string source)
      : file_(std::move(file)), source_(std::move(source)) {}

  ModelFile parse() {
    ModelFile model;
    check_format_version();
    model.architecture = architecture();
    model.loss = string_metadata("lmtrain.loss");
    const std::string task = string_metadata("lmtrain.task");
    if (task == "regression") {
      model.task = Task::kRegression;
    } else if (task == "classification") {
      model.task = Task::kClassification;
    } else {
      fail(
          fmt::format("metadata \"lmtrain.task\" is \"{}\"; expected \"regression\" or "
                      "\"classification\"",
                      task));
    }
    const std::string classes = string_metadata("lmtrain.num_classes");
    const auto num_classes = parse_decimal(classes);
    if (!num_classes)
      fail(fmt::format("metadata \"lmtrain.num_classes\" is \"{}\"; expected a decimal integer",
                       classes));
    model.num_classes = *num_classes;
    model.class_names = string_array("lmtrain.class_names");
    model.input_names = string_array("lmtrain.input_names");
    model.provenance = provenance();
    parameters(model);
    model.normalization.inputs.mean = normalization_tensor(kInputMean);
    model.normalization.inputs.scale = normalization_tensor(kInputStd);
    model.normalization.targets.mean = normalization_tensor(kTargetMean);
    model.normalization.targets.scale = normalization_tensor(kTargetStd);
    check_no_unexpected_tensors(model.architecture);
    validate_model_file(model, fmt::format("\"{}\"", source_));
    return model;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(
        fmt::format("\"{}\" is not a valid lmtrain model file: {}", source_, what));
  }

  const std::string* metadata(const std::string& key) const {
    const auto it = file_.metadata.find(key);
    return it == file_.metadata.end() ? nullptr : &it->second;
  }

  std::string string_metadata(const std::string& key) const {
    const std::string* value = metadata(key);
    if (!value) fail(fmt::format("metadata \"{}\" is missing", key));
    return *value;
  }

  Json json_metadata(const std::string& key) const {
    const std::string text = string_metadata(key);
    try {
      return Json::parse(text);
    } catch (const Json::exception& e) {  // parse errors, and numbers out of every range
      std::string reason = e.what();
      if (const auto pos = reason.find("] "); pos != std::string::npos) reason.erase(0, pos + 2);
      fail(fmt::format("metadata \"{}\" is not valid JSON: {}", key, reason));
    }
  }

  void check_format_version() const {
    if (!metadata("lmtrain.architecture")) {
      std::vector<std::string> names;
      for (const auto& t : file_.tensors) names.push_back(t.name);
      if (names.size() > 6) {
        names.resize(6);
        names.push_back("…");
      }
      fail(
          fmt::format("it has no \"lmtrain.architecture\" metadata, so it was not written by "
                      "lmtrain (its tensors: {}); lmtrain reads the model.safetensors it writes",
                      names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    const std::string version = string_metadata("lmtrain.format_version");
    if (version != kFormatVersion)
      fail(
          fmt::format("metadata \"lmtrain.format_version\" is \"{}\"; this lmtrain ({}) reads "
                      "format version {} (a newer lmtrain wrote the file?)",
                      version, lmtrain_version(), kFormatVersion));
  }

  ModelSpec architecture() const {
    const Json json = json_metadata("lmtrain.architecture");
    try {
      return model_spec_from_json(json);
    } catch (const InvalidArgument& e) {
      fail(fmt::format("metadata \"lmtrain.architecture\": {}", e.what()));
    }
  }

  std::vector<std::string> string_array(const char* key) const {
    if (!metadata(key)) return {};
    const Json json = json_metadata(key);
    std::vector<std::string> names;
    if (!json.is_array())
      fail(fmt::format("metadata \"{}\" is {}; expected a JSON array of strings", key,
                       json_excerpt(json)));
    for (std::size_t i = 0; i < json.size(); ++i) {
      if (!json[i].is_string())
        fail(fmt::format("metadata \"{}\"[{}] is {}; expected a string", key, i,
                         json_excerpt(json[i])));
      names.push_back(json[i].get<std::string>());
    }
    return names;
  }

  Json provenance() const {
    if (!metadata("lmtrain.provenance")) return Json::object();
    Json json = json_metadata("lmtrain.provenance");
    if (!json.is_object())
      fail(fmt::format("metadata \"lmtrain.provenance\" is {}; expected a JSON object",
                       json_excerpt(json)));
    return json;
  }

  void parameters(ModelFile& model) const {
    const ModelSpec& spec = model.architecture;
    std::optional<SafetensorsDtype> dtype;
    const SafetensorsTensor* first = nullptr;
    for (const ParameterTensor& p : parameter_tensors(spec)) {
      const SafetensorsTensor* t = file_.find(p.name);
      if (!t)
        fail(fmt::format("tensor \"{}\" of {} is missing; expected shape {} ({} values)", p.name,
                         layer_label(spec, p.layer), shape_text(p.shape), p.count));
      if (t->shape != p.shape)
        fail(fmt::format(
            "tensor \"{}\" has shape {} ({} values) but {} needs {} ({} values): the parameter "
            "count in the tensors disagrees with the architecture",
            p.name, shape_text(t->shape), t->num_elements(), layer_label(spec, p.layer),
            shape_text(p.shape), p.count));
      if (t->dtype != SafetensorsDtype::kF32 && t->dtype != SafetensorsDtype::kF64)
        fail(fmt::format("tensor \"{}\" has dtype {}; parameters are F32 or F64", p.name,
                         to_string(t->dtype)));
      if (dtype && *dtype != t->dtype)
        fail(
            fmt::format("tensor \"{}\" is {} but \"{}\" is {}; all parameter tensors must have "
                        "one dtype (the training precision)",
                        p.name, to_string(t->dtype), first->name, to_string(*dtype)));
      if (!dtype) {
        dtype = t->dtype;
        first = t;
      }
      const std::vector<double> values = detail::tensor_values(*t, source_);
      model.parameters.insert(model.parameters.end(), values.begin(), values.end());
    }
    model.parameter_dtype =
        dtype == SafetensorsDtype::kF32 ? ParameterDtype::kF32 : ParameterDtype::kF64;
  }

  std::vector<double> normalization_tensor(std::string_view name) const {
    const SafetensorsTensor* t = file_.find(name);
    if (!t) return {};
    if (t->shape.size() != 1)
      fail(fmt::format("tensor \"{}\" has shape {}; expected one dimension (one value per column)",
                       name, shape_text(t->shape)));
    return detail::tensor_values(*t, source_);
  }

  // A tensor the architecture does not explain is an error, not something to drop: it means the
  // file and its metadata disagree.
  void check_no_unexpected_tensors(const ModelSpec& spec) const {
    std::set<std::string> known{std::string(kInputMean), std::string(kInputStd),
                                std::string(kTargetMean), std::string(kTargetStd)};
    for (const ParameterTensor& p : parameter_tensors(spec)) known.insert(p.name);
    for (const auto& t : file_.tensors) {
      if (known.count(t.name)) continue;
      std::string why = "it is neither a parameter of the architecture nor a normalization tensor";
      const auto dot = t.name.find('.');
      if (dot != std::string::npos) {
        const auto layer = parse_decimal(t.name.substr(0, dot));
        if (layer && *layer < spec.layers().size())
          why = fmt::format("{} has no such parameter", layer_label(spec, *layer));
        else if (layer)
          why = fmt::format("the architecture has only {} layers", spec.layers().size());
      }
      fail(
          fmt::format("tensor \"{}\" (shape {}) is unexpected: {}; the parameter count in the "
                      "tensors disagrees with the architecture",
                      t.name, shape_text(t.shape), why));
    }
  }

  SafetensorsFile file_;
  std::string source_;
};

}  // namespace

std::string_view to_string(ParameterDtype dtype) {
  return dtype == ParameterDtype::kF32 ? "F32" : "F64";
}

std::string_view to_string(Task task) {
  return task == Task::kRegression ? "regression" : "classification";
}

std::vector<ParameterTensor> parameter_tensors(const ModelSpec& spec) {
  std::vector<ParameterTensor> tensors;
  const auto shapes = spec.output_shapes();
  std::size_t offset = 0;
  const auto add = [&](std::size_t layer, const char* what, std::vector<std::size_t> shape) {
    ParameterTensor t;
    t.name = fmt::format("{}.{}", layer, what);
    t.layer = layer;
    t.count = checked_product(shape, spec, layer);
    t.shape = std::move(shape);
    t.offset = offset;
    if (__builtin_add_overflow(offset, t.count, &offset))
      throw InvalidArgument("model: the parameter count overflows 64 bits");
    tensors.push_back(std::move(t));
  };
  for (std::size_t i = 0; i < spec.layers().size(); ++i) {
    const LayerSpec& l = spec.layers()[i];
    const ImageShape& in = i == 0 ? spec.input_shape() : shapes[i - 1];
    if (l.kind == LayerSpec::Kind::kDense) {
      std::size_t in_size = 0;
      if (__builtin_mul_overflow(in.channels, in.height, &in_size) ||
          __builtin_mul_overflow(in_size, in.width, &in_size))
        throw InvalidArgument(
            fmt::format("model: the input of layer {} has more values than 64 "
                        "bits count",
                        i));
      add(i, "weight", {l.units, in_size});
      add(i, "bias", {l.units});
    } else if (l.kind == LayerSpec::Kind::kConv2d) {
      add(i, "weight", {l.channels, in.channels, l.window.kernel_h, l.window.kernel_w});
      if (l.bias) add(i, "bias", {l.channels});
    }
  }
  return tensors;
}

Json model_spec_to_json(const ModelSpec& spec) {
  Json layers = Json::array();
  for (const LayerSpec& l : spec.layers()) {
    Json j = Json::object();
    j["type"] = to_string(l.kind);
    switch (l.kind) {
      case LayerSpec::Kind::kDense:
        j["units"] = l.units;
        break;
      case LayerSpec::Kind::kActivation:
        j["activation"] = std::string(to_string(l.activation));
        break;
      case LayerSpec::Kind::kConv2d:
        j["out_channels"] = l.channels;
        [[fallthrough]];
      case LayerSpec::Kind::kMaxPool2d:
      case LayerSpec::Kind::kAvgPool2d:
        j["kernel"] = pair_json(l.window.kernel_h, l.window.kernel_w);
        j["stride"] = pair_json(l.window.stride_h, l.window.stride_w);
        j["padding"] = pair_json(l.window.pad_h, l.window.pad_w);
        if (l.kind == LayerSpec::Kind::kConv2d) j["bias"] = l.bias;
        break;
      case LayerSpec::Kind::kFlatten:
        break;
    }
    layers.push_back(std::move(j));
  }
  const ImageShape& s = spec.input_shape();
  Json json = Json::object();
  json["input_shape"] = Json::array({s.channels, s.height, s.width});
  json["layers"] = std::move(layers);
  return json;
}

ModelSpec model_spec_from_json(const Json& json) {
  if (!json.is_object())
    throw InvalidArgument(
        fmt::format("architecture: expected an object with \"input_shape\" and \"layers\", got {}",
                    json_excerpt(json)));
  check_keys(json, "top level", {"input_shape", "layers"});
  const Json& shape = required(json, "top level", "input_shape");
  ImageShape input;
  if (shape.is_array() && shape.size() == 3) {
    input.channels = size_field(shape[0], "input_shape[0] (channels)", false);
    input.height = size_field(shape[1], "input_shape[1] (height)", false);
    input.width = size_field(shape[2], "input_shape[2] (width)", false);
  } else if (shape.is_array() && shape.size() == 1) {
    input.channels = size_field(shape[0], "input_shape[0] (features)", false);
  } else {
    bad_field("input_shape", fmt::format("expected [channels, height, width] or [features], got {}",
                                         json_excerpt(shape)));
  }
  ModelSpec spec(input);

  const Json& layers = required(json, "top level", "layers");
  if (!layers.is_array())
    bad_field("layers",
              fmt::format("expected an array of layer objects, got {}", json_excerpt(layers)));
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Json& l = layers[i];
    std::string field = fmt::format("layers[{}]", i);
    if (!l.is_object())
      bad_field(field, fmt::format("expected an object with \"type\", got {}", json_excerpt(l)));
    const Json& type_json = required(l, field, "type");
    const std::string type = type_json.is_string() ? type_json.get<std::string>() : "";
    field += fmt::format(" ({})", type.empty() ? json_excerpt(type_json) : type);
    if (type == "dense") {
      check_keys(l, field, {"type", "units"});
      spec.dense(size_field(required(l, field, "units"), field + ".units", false));
    } else if (type == "activation") {
      check_keys(l, field, {"type", "activation"});
      const Json& a = required(l, field, "activation");
      const auto f = a.is_string() ? parse_activation(a.get<std::string>()) : std::nullopt;
      if (!f) {
        std::vector<std::string_view> names;
        for (const auto& [kind, name] : kActivationNames) names.push_back(name);
        bad_field(field + ".activation", fmt::format("{} is not an activation; expected one of {}",
                                                     json_excerpt(a), fmt::join(names, ", ")));
      }
      spec.activation(*f);
    } else if (type == "conv2d") {
      check_keys(l, field, {"type", "out_channels", "kernel", "stride", "padding", "bias"});
      const std::size_t channels =
          size_field(required(l, field, "out_channels"), field + ".out_channels", false);
      bool bias = true;
      if (l.contains("bias")) {
        if (!l["bias"].is_boolean())
          bad_field(field + ".bias",
                    fmt::format("expected true or false, got {}", json_excerpt(l["bias"])));
        bias = l["bias"].get<bool>();
      }
      spec.conv2d(channels, window_field(l, field, false), bias);
    } else if (type == "max_pool2d" || type == "avg_pool2d") {
      check_keys(l, field, {"type", "kernel", "stride", "padding"});
      const Window2d w = window_field(l, field, true);
      if (type == "max_pool2d") {
        spec.max_pool2d(w);
      } else {
        spec.avg_pool2d(w);
      }
    } else if (type == "flatten") {
      check_keys(l, field, {"type"});
      spec.flatten();
    } else {
      bad_field(field + ".type", fmt::format("{} is not a layer type; expected one of \"dense\", "
                                             "\"activation\", \"conv2d\", \"max_pool2d\", "
                                             "\"avg_pool2d\", \"flatten\"",
                                             json_excerpt(type_json)));
    }
  }
  spec.validate();
  return spec;
}

bool apply_output_link(const ModelFile& model, std::span<double> outputs) {
  const std::size_t cols = model.architecture.outputs();
  if (cols == 0 || outputs.size() % cols != 0)
    throw InvalidArgument(
        fmt::format("apply_output_link: {} values are not whole rows of {}", outputs.size(), cols));
  if (model.task == Task::kClassification) {
    for (std::size_t first = 0; first < outputs.size(); first += cols) {
      const std::span<double> row = outputs.subspan(first, cols);
      const double largest = *std::max_element(row.begin(), row.end());
      double sum = 0;
      for (double& z : row) sum += z = std::exp(z - largest);
      for (double& p : row) p /= sum;
    }
    return true;
  }
  if (model.loss != to_string(LossKind::kBce)) return false;
  for (double& z : outputs) z = 1.0 / (1.0 + std::exp(-z));
  return true;
}

void validate_model_file(const ModelFile& model, const std::string& context) {
  const ModelSpec& spec = model.architecture;
  try {
    spec.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", context, e.what()));
  }
  std::size_t count = 0;
  for (const ParameterTensor& p : parameter_tensors(spec)) count += p.count;
  if (model.parameters.size() != count)
    throw InvalidArgument(fmt::format("{}: {} parameters given but the architecture {} has {}",
                                      context, model.parameters.size(), spec.describe(), count));
  const Normalization& n = model.normalization;
  check_normalization_pair(n.inputs.mean, n.inputs.scale, spec.inputs(), "input", "input", context);
  check_normalization_pair(n.targets.mean, n.targets.scale, spec.outputs(), "target", "output",
                           context);
  if (!parse_loss(model.loss)) {
    std::vector<std::string_view> names;
    for (const auto& [kind, name] : kLossNames) names.push_back(name);
    throw InvalidArgument(fmt::format("{}: loss \"{}\" is not known; expected one of {}", context,
                                      model.loss, fmt::join(names, ", ")));
  }
  if (model.task == Task::kRegression) {
    if (model.num_classes != 0 || !model.class_names.empty())
      throw InvalidArgument(fmt::format(
          "{}: task regression has num_classes = {} and {} class names; expected 0 and none "
          "(or task classification)",
          context, model.num_classes, model.class_names.size()));
  } else {
    if (model.num_classes < 2)
      throw InvalidArgument(
          fmt::format("{}: task classification has num_classes = {}; expected ≥ 2", context,
                      model.num_classes));
    const std::size_t outputs = spec.outputs();
    if (outputs != model.num_classes && !(model.num_classes == 2 && outputs == 1))
      throw InvalidArgument(fmt::format(
          "{}: task classification with {} classes but the network has {} outputs; expected one "
          "output per class (or 1 output for 2 classes)",
          context, model.num_classes, outputs));
    if (!model.class_names.empty() && model.class_names.size() != model.num_classes)
      throw InvalidArgument(
          fmt::format("{}: {} class names for num_classes = {}; expected none "
                      "or one per class",
                      context, model.class_names.size(), model.num_classes));
  }
  if (!model.input_names.empty() && model.input_names.size() != spec.inputs())
    throw InvalidArgument(
        fmt::format("{}: {} input names for a network of {} inputs; expected "
                    "none or one per input",
                    context, model.input_names.size(), spec.inputs()));
  if (!model.provenance.is_object())
    throw InvalidArgument(fmt::format("{}: provenance is {}; expected a JSON object", context,
                                      json_excerpt(model.provenance)));
}

std::string_view lmtrain_version() {
  return LMTRAIN_VERSION_STRING;
}

std::string utc_iso8601(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

Json make_provenance(std::chrono::system_clock::time_point time) {
  Json p = Json::object();
  p["lmtrain_version"] = std::string(lmtrain_version());
  p["date"] = utc_iso8601(time);
  return p;
}

template <typename T>
std::string encode_model_file(const ModelFile& model) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  validate_model_file(model, "write_model_file");
  SafetensorsFile file;
  for (const ParameterTensor& p : parameter_tensors(model.architecture)) {
    std::vector<T> values(p.count);
    for (std::size_t k = 0; k < p.count; ++k)
      values[k] = static_cast<T>(model.parameters[p.offset + k]);
    file.tensors.push_back(
        SafetensorsTensor::from_values<T>(p.name, p.shape, std::span<const T>(values)));
  }
  const Normalization& n = model.normalization;
  const auto add_normalization = [&](std::string_view name, const std::vector<double>& v) {
    if (!v.empty())
      file.tensors.push_back(SafetensorsTensor::from_values<double>(std::string(name), {v.size()},
                                                                    std::span<const double>(v)));
  };
  add_normalization(kInputMean, n.inputs.mean);
  add_normalization(kInputStd, n.inputs.scale);
  add_normalization(kTargetMean, n.targets.mean);
  add_normalization(kTargetStd, n.targets.scale);

  Json provenance = model.provenance;
  if (!provenance.contains("lmtrain_version"))
    provenance["lmtrain_version"] = std::string(lmtrain_version());
  file.metadata["format"] = "pt";
  file.metadata["lmtrain.format_version"] = std::string(kFormatVersion);
  file.metadata["lmtrain.architecture"] = model_spec_to_json(model.architecture).dump();
  file.metadata["lmtrain.loss"] = model.loss;
  file.metadata["lmtrain.task"] = std::string(to_string(model.task));
  file.metadata["lmtrain.num_classes"] = fmt::format("{}", model.num_classes);
  try {
    if (!model.class_names.empty())
      file.metadata["lmtrain.class_names"] = Json(model.class_names).dump();
    if (!model.input_names.empty())
      file.metadata["lmtrain.input_names"] = Json(model.input_names).dump();
    file.metadata["lmtrain.provenance"] = provenance.dump();
  } catch (const Json::type_error& e) {
    throw InvalidArgument(fmt::format(
        "write_model_file: the class or input names or the provenance hold text that is not "
        "UTF-8 ({})",
        e.what()));
  }
  return detail::encode_safetensors(file);
}

template std::string encode_model_file<float>(const ModelFile&);
template std::string encode_model_file<double>(const ModelFile&);

template <typename T>
void write_model_file(const std::string& path, const ModelFile& model) {
  write_file_atomically(path, encode_model_file<T>(model));
}

template void write_model_file<float>(const std::string&, const ModelFile&);
template void write_model_file<double>(const std::string&, const ModelFile&);

void write_model_file(const std::string& path, const ModelFile& model, ParameterDtype precision) {
  if (precision == ParameterDtype::kF32) {
    write_model_file<float>(path, model);
  } else {
    write_model_file<double>(path, model);
  }
}

ModelFile parse_model_file(std::string_view bytes, const std::string& source) {
  return ModelFileParser(detail::parse_safetensors(bytes, source), source).parse();
}

ModelFile read_model_file(const std::string& path) {
  return ModelFileParser(detail::read_safetensors(path), path).parse();
}

template <typename T>
ModelFile trained_model_file(const ModelSpec& spec, const std::vector<T>& params,
                             const Normalization& normalization, std::string_view loss,
                             std::size_t num_classes, std::vector<std::string> class_names,
                             std::uint64_t seed, const Summary& summary,
                             nlohmann::json provenance) {
  ModelFile model;
  model.architecture = spec;
  model.parameters.assign(params.begin(), params.end());
  model.parameter_dtype = std::is_same_v<T, float> ? ParameterDtype::kF32 : ParameterDtype::kF64;
  model.normalization = normalization;
  model.loss = std::string(loss);
  model.task = num_classes > 0 ? Task::kClassification : Task::kRegression;
  model.num_classes = num_classes;
  model.class_names = std::move(class_names);
  provenance["seed"] = seed;
  provenance["epochs"] = summary.epochs;
  provenance["final_loss"] = summary.final_loss;
  if (!std::isnan(summary.final_validation_loss))
    provenance["final_validation_loss"] = summary.final_validation_loss;
  provenance["termination"] = std::string(to_string(summary.termination));
  model.provenance = std::move(provenance);
  return model;
}

template ModelFile trained_model_file<float>(const ModelSpec&, const std::vector<float>&,
                                             const Normalization&, std::string_view, std::size_t,
                                             std::vector<std::string>, std::uint64_t,
                                             const Summary&, nlohmann::json);
template ModelFile trained_model_file<double>(const ModelSpec&, const std::vector<double>&,
                                              const Normalization&, std::string_view, std::size_t,
                                              std::vector<std::string>, std::uint64_t,
                                              const Summary&, nlohmann::json);

}  // namespace lmtrain::io
