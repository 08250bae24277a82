#include "run_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "io/closest_name.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"

namespace lmtrain::cli {

namespace {

std::string where(const toml::node& node) {
  const auto& src = node.source();
  if (src.path && src.begin.line > 0) return fmt::format("{}:{}", *src.path, src.begin.line);
  if (src.path) return *src.path;
  return "a --set override";  // only the overrides' nodes are made without a source
}

// A TOML table with the keys it accepts.  Every read records its key; finish() rejects the rest,
// suggesting the nearest accepted key.
class Section {
 public:
  Section(const toml::table& table, std::string name) : table_(table), name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  std::string qualified(std::string_view key) const {
    return name_.empty() ? std::string(key) : fmt::format("{}.{}", name_, key);
  }

  const toml::node* node(std::string_view key) {
    known_.emplace(key);
    return table_.get(key);
  }

  [[noreturn]] void type_error(std::string_view key, const toml::node& n,
                               std::string_view expected) const {
    throw InvalidArgument(fmt::format("{}: {} has the wrong type ({}); expected {}", where(n),
                                      qualified(key), type_name(n), expected));
  }

  std::optional<double> number(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<double>()) return *v;
    if (auto i = n->value_exact<std::int64_t>()) return static_cast<double>(*i);
    type_error(key, *n, "a number");
  }
  double number(std::string_view key, double fallback) { return number(key).value_or(fallback); }

  std::optional<std::int64_t> integer(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (auto i = n->value_exact<std::int64_t>()) return *i;
    type_error(key, *n, "an integer");
  }
  std::size_t count(std::string_view key, std::size_t fallback, std::size_t minimum = 0) {
    const toml::node* n = node(key);
    auto v = integer(key);
    if (!v) return fallback;
    if (*v < static_cast<std::int64_t>(minimum))
      throw InvalidArgument(fmt::format("{}: {} = {}; expected an integer ≥ {}", where(*n),
                                        qualified(key), *v, minimum));
    return static_cast<std::size_t>(*v);
  }

  std::optional<bool> boolean(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (auto b = n->value_exact<bool>()) return *b;
    type_error(key, *n, "true or false");
  }

  // true, false or "auto" (unset) into *out when the key is present; an absent key leaves it.
  void boolean_or_auto(std::string_view key, std::optional<bool>* out) {
    const toml::node* n = node(key);
    if (!n) return;
    if (auto b = n->value_exact<bool>()) {
      *out = *b;
    } else if (auto s = n->value_exact<std::string>(); s && *s == "auto") {
      out->reset();
    } else {
      type_error(key, *n, "true, false or \"auto\"");
    }
  }

  std::optional<std::string> string(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (auto s = n->value_exact<std::string>()) return *s;
    type_error(key, *n, "a string");
  }

  // A string from a fixed set of choices.
  std::optional<std::string> choice(std::string_view key,
                                    std::initializer_list<std::string_view> choices) {
    auto s = string(key);
    if (!s) return std::nullopt;
    for (auto c : choices)
      if (*s == c) return s;
    std::vector<std::string> names(choices.begin(), choices.end());
    const auto hint = io::detail::closest_name(*s, names);
    throw InvalidArgument(fmt::format("{}: {} = \"{}\" is not one of {}{}", where(*node(key)),
                                      qualified(key), *s, fmt::join(names, ", "),
                                      hint ? fmt::format("; did you mean \"{}\"?", *hint) : ""));
  }

  // Strings or integers (column names or indices) as strings; a single value is a one-item list.
  std::vector<std::string> names(std::string_view key) {
    const toml::node* n = node(key);
    std::vector<std::string> out;
    if (!n) return out;
    auto one = [&](const toml::node& item) {
      if (auto s = item.value_exact<std::string>()) {
        out.push_back(*s);
      } else if (auto i = item.value_exact<std::int64_t>(); i && *i >= 0) {
        out.push_back(std::to_string(*i));
      } else {
        type_error(key, item, "column names (strings) or 0-based column indices");
      }
    };
    if (const auto* arr = n->as_array()) {
      for (const auto& item : *arr) one(item);
    } else {
      one(*n);
    }
    return out;
  }

  std::vector<double> numbers(std::string_view key) {
    const toml::node* n = node(key);
    std::vector<double> out;
    if (!n) return out;
    const auto* arr = n->as_array();
    if (!arr) type_error(key, *n, "an array of numbers");
    for (const auto& item : *arr) {
      if (auto v = item.value<double>()) {
        out.push_back(*v);
      } else {
        type_error(key, item, "an array of numbers");
      }
    }
    return out;
  }

  const toml::table* table(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return nullptr;
    if (const auto* t = n->as_table()) return t;
    type_error(key, *n, "a table");
  }

  // Rejects keys nobody asked for.
  void finish() const {
    for (const auto& [key, value] : table_) {
      const std::string k(key.str());
      if (known_.count(k)) continue;
      std::vector<std::string> candidates(known_.begin(), known_.end());
      const auto hint = io::detail::closest_name(k, candidates);
      throw InvalidArgument(fmt::format(
          "{}: unknown key '{}'{}{}", where(value), qualified(k),
          hint ? fmt::format("; did you mean '{}'?", qualified(*hint)) : "",
          hint ? "" : fmt::format(" (valid keys here: {})", fmt::join(candidates, ", "))));
    }
  }

 private:
  static std::string_view type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::string:
        return "string";
      case toml::node_type::integer:
        return "integer";
      case toml::node_type::floating_point:
        return "floating-point number";
      case toml::node_type::boolean:
        return "boolean";
      case toml::node_type::array:
        return "array";
      case toml::node_type::table:
        return "table";
      default:
        return "date/time";
    }
  }

  const toml::table& table_;
  std::string name_;
  std::set<std::string, std::less<>> known_;
};

// "model.layers[0].units" as "model.layers.0.units": the form the errors name an array's element
// in, and the dotted one, both reach it.
std::string dotted_key(const std::string& key, const std::string& source) {
  std::string out;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] != '[') {
      out += key[i];
      continue;
    }
    const auto close = key.find(']', i);
    const std::string index =
        close == std::string::npos ? std::string() : key.substr(i + 1, close - i - 1);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos)
      throw InvalidArgument(fmt::format(
          "{}: '{}' is not an array index; write model.layers[0].units or model.layers.0.units",
          source, key.substr(i, close == std::string::npos ? std::string::npos : close - i + 1)));
    out += "." + index;
    i = close;
  }
  return out;
}

// Applies one "a.b.c=value" (or "a.b[0].c=value") override to the document.
void apply_override(toml::table& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InvalidArgument(
        fmt::format("--set {}: expected key=value, e.g. --set trainer.max_epochs=100", assignment));
  const std::string source = fmt::format("--set {}", assignment);
  const std::string key = dotted_key(assignment.substr(0, eq), source),
                    text = assignment.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse("value = " + text, source);
  } catch (const toml::parse_error&) {
    // A bare word is a string: --set solver.damping=nielsen.
    parsed = toml::table{{"value", text}};
  }
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  toml::node* cursor = &root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (auto* t = cursor->as_table()) {
      if (!t->contains(parts[i])) t->insert(parts[i], toml::table{});
      cursor = t->get(parts[i]);
    } else if (auto* a = cursor->as_array()) {
      std::size_t index = 0;
      const auto [p, ec] =
          std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), index);
      if (ec != std::errc{} || index >= a->size())
        throw InvalidArgument(fmt::format("{}: '{}' is not an index of the array (0 … {})", source,
                                          parts[i], a->size() == 0 ? 0 : a->size() - 1));
      cursor = a->get(index);
    } else {
      throw InvalidArgument(
          fmt::format("{}: '{}' is a value, not a table", source,
                      fmt::join(parts.begin(), parts.begin() + static_cast<long>(i) + 1, ".")));
    }
  }
  auto* target = cursor->as_table();
  if (!target) throw InvalidArgument(fmt::format("{}: cannot set a key inside a value", source));
  parsed.get("value")->visit([&](auto&& v) { target->insert_or_assign(parts.back(), v); });
}

LayerSpec parse_layer(const toml::node& node, std::size_t index) {
  const toml::table* t = node.as_table();
  if (!t)
    throw InvalidArgument(fmt::format(
        "{}: model.layers[{}] must be a table such as {{ type = \"dense\", units = 20 }}",
        where(node), index));
  Section s(*t, fmt::format("model.layers[{}]", index));
  const auto type = s.string("type");
  if (!type)
    throw InvalidArgument(
        fmt::format("{}: model.layers[{}] has no 'type' (dense, conv2d, "
                    "max_pool2d, avg_pool2d, flatten or an activation name)",
                    where(node), index));
  LayerSpec layer;
  // A missing required key is reported after the unknown ones: { type = "dense", unit = 5 } is
  // a misspelling of units, not a layer without units.
  std::string missing;
  if (*type == "dense") {
    layer.kind = LayerSpec::Kind::kDense;
    layer.units = s.count("units", 0, 1);
    if (layer.units == 0) missing = "(dense) needs units ≥ 1";
  } else if (*type == "conv2d") {
    layer.kind = LayerSpec::Kind::kConv2d;
    layer.channels = s.count("channels", 0, 1);
    const std::size_t kernel = s.count("kernel", 0, 1);
    if (layer.channels == 0 || kernel == 0) missing = "(conv2d) needs channels ≥ 1 and kernel ≥ 1";
    const std::size_t stride = s.count("stride", 1, 1), padding = s.count("padding", 0);
    layer.window = Window2d{kernel, kernel, stride, stride, padding, padding};
    layer.bias = s.boolean("bias").value_or(true);
  } else if (*type == "max_pool2d" || *type == "avg_pool2d") {
    layer.kind = *type == "max_pool2d" ? LayerSpec::Kind::kMaxPool2d : LayerSpec::Kind::kAvgPool2d;
    const std::size_t kernel = s.count("kernel", 0, 1);
    if (kernel == 0) missing = fmt::format("({}) needs kernel ≥ 1", *type);
    const std::size_t stride = s.count("stride", kernel, 1), padding = s.count("padding", 0);
    layer.window = Window2d{kernel, kernel, stride, stride, padding, padding};
  } else if (*type == "flatten") {
    layer.kind = LayerSpec::Kind::kFlatten;
  } else if (auto f = parse_activation(*type)) {
    layer.kind = LayerSpec::Kind::kActivation;
    layer.activation = *f;
  } else {
    std::vector<std::string> kinds = {"dense", "conv2d", "max_pool2d", "avg_pool2d", "flatten"};
    for (const auto& [k, name] : kActivationNames) kinds.emplace_back(name);
    const auto hint = io::detail::closest_name(*type, kinds);
    throw InvalidArgument(fmt::format("{}: model.layers[{}].type = \"{}\" is not a layer type{}",
                                      where(node), index, *type,
                                      hint ? fmt::format("; did you mean \"{}\"?", *hint) : ""));
  }
  s.finish();
  if (!missing.empty())
    throw InvalidArgument(fmt::format("{}: model.layers[{}] {}", where(node), index, missing));
  return layer;
}

DataSource parse_source(const toml::table& t, const std::string& name,
                        const std::filesystem::path& base) {
  Section s(t, name);
  DataSource d;
  d.key = name;
  auto resolve = [&](const std::string& p) {
    const std::filesystem::path path(p);
    return (path.is_absolute() ? path : base / path).lexically_normal().string();
  };
  const auto path = s.string("path");
  if (!path)
    throw InvalidArgument(fmt::format(
        "{}: [{}] needs path = \"...\" (a csv, npy, idx or fann file)", where(t), name));
  d.path = resolve(*path);
  if (auto tp = s.string("targets_path")) d.targets_path = resolve(*tp);
  d.format = s.choice("format", {"auto", "csv", "npy", "idx", "fann"}).value_or("auto");
  d.inputs = s.names("inputs");
  d.targets = s.names("targets");
  if (auto delim = s.string("delimiter")) {
    if (delim->size() != 1)
      throw InvalidArgument(fmt::format("{}: {}.delimiter = \"{}\"; expected one character",
                                        where(*s.node("delimiter")), name, *delim));
    d.delimiter = (*delim)[0];
  }
  d.rows = s.count("rows", 0);
  if (auto w = s.string("weights")) d.weights = *w;
  if (auto wp = s.string("weights_path")) d.weights_path = resolve(*wp);
  if (name == "data.test" && (!d.weights.empty() || !d.weights_path.empty()))
    throw InvalidArgument(fmt::format(
        "{}: data.test takes no sample weights: the held-out figures are unweighted; weigh the "
        "training and validation data",
        where(t)));
  s.finish();
  return d;
}

template <typename Setter>
void set_double(Section& s, std::string_view key, Setter set) {
  if (auto v = s.number(key)) set(*v);
}

void parse_solver(Section& s, SolverOptions& o) {
  if (auto v = s.choice("linear_solver",
                        {"auto", "cholesky", "dual", "eigen", "cg", "distributed_cholesky"}))
    o.linear_solver = *parse_linear_solver(*v);
  if (auto v = s.choice("damping", {"multiplicative", "nielsen"})) o.damping = *parse_damping(*v);
  if (auto v = s.choice("damping_matrix", {"identity", "marquardt"}))
    o.damping_matrix = *parse_damping_matrix(*v);
  set_double(s, "lambda_initial", [&](double v) { o.lambda_initial = v; });
  set_double(s, "lambda_min", [&](double v) { o.lambda_min = v; });
  set_double(s, "lambda_max", [&](double v) { o.lambda_max = v; });
  set_double(s, "lambda_increase", [&](double v) { o.lambda_increase = v; });
  set_double(s, "lambda_decrease", [&](double v) { o.lambda_decrease = v; });
  o.damping_per_sample = s.boolean("damping_per_sample").value_or(o.damping_per_sample);
  o.restart_lambda_at_max = s.boolean("restart_lambda_at_max").value_or(o.restart_lambda_at_max);
  set_double(s, "marquardt_min", [&](double v) { o.marquardt_min = v; });
  set_double(s, "marquardt_max", [&](double v) { o.marquardt_max = v; });
  set_double(s, "learning_rate", [&](double v) { o.learning_rate = v; });
  o.max_attempts =
      static_cast<int>(s.count("max_attempts", static_cast<std::size_t>(o.max_attempts), 1));
  set_double(s, "gradient_tolerance", [&](double v) { o.gradient_tolerance = v; });
  set_double(s, "function_tolerance", [&](double v) { o.function_tolerance = v; });
  set_double(s, "parameter_tolerance", [&](double v) { o.parameter_tolerance = v; });
  o.memory_budget_bytes = s.count("memory_budget_bytes", o.memory_budget_bytes);
  set_double(s, "memory_fraction", [&](double v) { o.memory_fraction = v; });
  o.max_slice_samples = s.count("max_slice_samples", o.max_slice_samples);
  set_double(s, "cg_forcing", [&](double v) { o.cg_forcing = v; });
  if (auto v = s.choice("regularization", {"none", "l2", "bayesian", "ard"}))
    o.regularization = *parse_regularization(*v);
  set_double(s, "weight_decay", [&](double v) { o.weight_decay = v; });
  set_double(s, "ard_initial_scale", [&](double v) { o.ard_initial_scale = v; });
  set_double(s, "ard_max_factor", [&](double v) { o.ard_max_factor = v; });
  o.cg_max_iterations = s.count("cg_max_iterations", o.cg_max_iterations);
  o.distributed_block_size = s.count("distributed_block_size", o.distributed_block_size, 0);
  // Absent or "auto": SolverOptions::geodesic_acceleration's auto (on except for softmax
  // classification); "auto" lets `--set` undo a config file's true or false.
  s.boolean_or_auto("geodesic_acceleration", &o.geodesic_acceleration);
  set_double(s, "geodesic_ratio", [&](double v) { o.geodesic_ratio = v; });
  set_double(s, "geodesic_step", [&](double v) { o.geodesic_step = v; });
  // Absent: auto (−1, SolverOptions::geodesic_backoff_max); validate() checks the range.
  if (const auto v = s.integer("geodesic_backoff_max"))
    o.geodesic_backoff_max = static_cast<int>(std::clamp<std::int64_t>(
        *v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  if (const auto v = s.boolean("tf32")) o.tf32 = *v;
  if (const auto v = s.boolean("cuda_graphs")) o.cuda_graphs = *v;
  if (auto v = s.choice("normal_matrix", {"auto", "syrk", "split_k"}))
    o.normal_matrix = *parse_normal_matrix_method(*v);
  s.finish();
}

}  // namespace

ModelSpec RunConfig::model_spec(std::size_t inputs) const {
  ModelSpec spec = model.input_shape ? ModelSpec(*model.input_shape) : ModelSpec(inputs);
  for (const LayerSpec& l : model.layers) {
    switch (l.kind) {
      case LayerSpec::Kind::kDense:
        spec.dense(l.units);
        break;
      case LayerSpec::Kind::kActivation:
        spec.activation(l.activation);
        break;
      case LayerSpec::Kind::kConv2d:
        spec.conv2d(l.channels, l.window, l.bias);
        break;
      case LayerSpec::Kind::kMaxPool2d:
        spec.max_pool2d(l.window);
        break;
      case LayerSpec::Kind::kAvgPool2d:
        spec.avg_pool2d(l.window);
        break;
      case LayerSpec::Kind::kFlatten:
        spec.flatten();
        break;
    }
  }
  return spec;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InvalidArgument(
        fmt::format("{}: cannot open the run configuration ({})", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_run_config(text.str(), path, overrides);
}

namespace {

// seed, precision, device, communicator and output_dir.
void parse_top_level(Section& top, const std::string& path, const std::filesystem::path& base,
                     RunConfig& c) {
  c.seed = static_cast<std::uint64_t>(top.count("seed", 0));
  if (auto p = top.choice("precision", {"auto", "float32", "mixed", "float64"}))
    c.precision = *parse_precision(*p);
  c.solver.system_precision = resolve_precision(c.precision).system;
  c.device = top.string("device").value_or("cpu");
  try {
    (void)parse_device(c.device);  // the library's parser (backend/device.h), one set of rules
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", where(*top.node("device")), e.what()));
  }
  if (auto comm = top.choice("communicator", {"auto", "nccl", "host"}))
    c.communicator = *comm == "auto"   ? CommunicatorChoice::kAuto
                     : *comm == "nccl" ? CommunicatorChoice::kNccl
                                       : CommunicatorChoice::kHost;
  if (c.communicator == CommunicatorChoice::kNccl && c.device == "cpu")
    throw InvalidArgument(
        fmt::format("{}: communicator = \"nccl\" sums GPU buffers but device = "
                    "\"cpu\"; set device = \"cuda\" or communicator = \"auto\"",
                    where(*top.node("communicator"))));
  const auto out = top.string("output_dir");
  const std::filesystem::path out_path(
      out.value_or("runs/" + std::filesystem::path(path).stem().string()));
  c.output_dir = (out_path.is_absolute() ? out_path : base / out_path).lexically_normal().string();
}

std::optional<ImageShape> parse_input_shape(Section& s) {
  std::optional<ImageShape> shape;
  if (auto n = s.integer("inputs")) {
    if (*n < 1)
      throw InvalidArgument(
          fmt::format("{}: model.inputs = {}; expected ≥ 1", where(*s.node("inputs")), *n));
    shape = ImageShape{static_cast<std::size_t>(*n), 1, 1};
  }
  if (const toml::node* node = s.node("input_shape")) {
    const auto* arr = node->as_array();
    std::vector<std::size_t> dims;
    if (arr)
      for (const auto& d : *arr)
        if (auto v = d.value_exact<std::int64_t>(); v && *v > 0)
          dims.push_back(static_cast<std::size_t>(*v));
    if (!arr || dims.size() != arr->size() || dims.empty() || dims.size() > 3)
      throw InvalidArgument(fmt::format(
          "{}: model.input_shape must be [channels, height, width] (or [features]) of positive "
          "integers",
          where(*node)));
    while (dims.size() < 3) dims.push_back(1);
    shape = ImageShape{dims[0], dims[1], dims[2]};
  }
  return shape;
}

void parse_model(const toml::table& model, ModelConfig& m) {
  Section s(model, "model");
  m.input_shape = parse_input_shape(s);
  if (auto init = s.choice("init", {"torch", "glorot", "he"})) m.init = parse_init(*init);
  const toml::node* layers = s.node("layers");
  const toml::array* arr = layers ? layers->as_array() : nullptr;
  if (!arr || arr->empty())
    throw InvalidArgument(fmt::format(
        "{}: model.layers must be a non-empty array of layer tables, e.g. [{{ type = \"dense\", "
        "units = 20 }}, {{ type = \"tanh\" }}, {{ type = \"dense\", units = 1 }}]",
        layers ? where(*layers) : where(model)));
  for (std::size_t i = 0; i < arr->size(); ++i) m.layers.push_back(parse_layer(*arr->get(i), i));
  s.finish();
}

void parse_data(const toml::table& data, const std::filesystem::path& base, DataConfig& d) {
  Section s(data, "data");
  d.task = s.choice("task", {"regression", "classification"}).value_or("regression") == "regression"
               ? Task::kRegression
               : Task::kClassification;
  d.classes = s.count("classes", 0);
  d.validation_fraction = s.number("validation_fraction", 0.0);
  d.test_fraction = s.number("test_fraction", 0.0);
  for (auto [key, value] : {std::pair{"validation_fraction", d.validation_fraction},
                            std::pair{"test_fraction", d.test_fraction}})
    if (!(value >= 0 && value < 1))
      throw InvalidArgument(
          fmt::format("{}: data.{} = {}; expected 0 ≤ value < 1", where(*s.node(key)), key, value));
  if (d.validation_fraction + d.test_fraction >= 1)
    throw InvalidArgument(
        fmt::format("{}: data.validation_fraction + data.test_fraction = {} "
                    "leaves no training samples; keep the sum below 1",
                    where(data), d.validation_fraction + d.test_fraction));
  d.standardize_inputs =
      s.choice("normalize_inputs", {"standardize", "none"}).value_or("standardize") ==
      "standardize";
  d.standardize_targets =
      s.choice("normalize_targets", {"standardize", "none"}).value_or("standardize") ==
          "standardize" &&
      d.task == Task::kRegression;
  const toml::table* train = s.table("train");
  if (!train)
    throw InvalidArgument(
        fmt::format("{}: no [data.train] table with the training data's path", where(data)));
  d.train = parse_source(*train, "data.train", base);
  if (const toml::table* v = s.table("validation"))
    d.validation = parse_source(*v, "data.validation", base);
  if (const toml::table* t = s.table("test")) d.test = parse_source(*t, "data.test", base);
  s.finish();
}

void parse_loss_section(const toml::table* loss, Task task, LossOptions& o) {
  if (loss == nullptr) {
    if (task == Task::kClassification) o.kind = LossKind::kCrossEntropy;
    return;
  }
  Section s(*loss, "loss");
  if (auto type = s.choice("type", {"mse", "cross_entropy", "cross_entropy_sqrt",
                                    "cross_entropy_sampled", "bce", "huber", "l1"}))
    o.kind = *lmtrain::parse_loss(*type);
  o.output_weights = s.numbers("output_weights");
  o.huber_delta = s.number("huber_delta", o.huber_delta);
  s.finish();
}

void parse_trainer(const toml::table& trainer, RunConfig& c) {
  Section s(trainer, "trainer");
  TrainerOptions& t = c.trainer;
  t.max_epochs = static_cast<int>(s.count("max_epochs", static_cast<std::size_t>(t.max_epochs), 1));
  t.batch_size = s.count("batch_size", t.batch_size);
  t.shuffle = s.boolean("shuffle").value_or(t.shuffle);
  t.loss_goal = s.number("loss_goal", t.loss_goal);
  t.max_time_seconds = s.number("max_time_seconds", t.max_time_seconds);
  t.max_validation_failures = static_cast<int>(
      s.count("max_validation_failures", static_cast<std::size_t>(t.max_validation_failures), 1));
  t.restore_best = s.boolean("restore_best").value_or(t.restore_best);
  t.stop_grace_s = s.number("stop_grace_s", t.stop_grace_s);
  if (auto v = s.choice("balance", {"equal", "measured"})) t.balance = *parse_batch_balance(*v);
  c.checkpoint_every = static_cast<int>(s.count("checkpoint_every", 1));
  s.finish();
  std::string error;
  if (!t.is_valid(&error))
    throw InvalidArgument(fmt::format("{}: {}", where(trainer), in_config_terms(error)));
}

}  // namespace

RunConfig parse_run_config(std::string_view text, const std::string& path,
                           const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw InvalidArgument(
        fmt::format("{}:{}:{}: {}", path, src.begin.line, src.begin.column, e.description()));
  }
  for (const auto& o : overrides) apply_override(root, o);

  RunConfig c;
  c.config_path = path;
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  Section top(root, "");
  parse_top_level(top, path, base, c);
  const toml::table* model = top.table("model");
  if (!model)
    throw InvalidArgument(fmt::format("{}: no [model] table; add one with layers = [...]", path));
  parse_model(*model, c.model);
  const toml::table* data = top.table("data");
  if (!data)
    throw InvalidArgument(
        fmt::format("{}: no [data] table; add [data.train] path = \"...\"", path));
  parse_data(*data, base, c.data);
  parse_loss_section(top.table("loss"), c.data.task, c.loss);
  c.data.standardize_targets = c.loss.standardizes_targets(c.data.standardize_targets);
  if (const toml::table* solver = top.table("solver")) {
    Section s(*solver, "solver");
    parse_solver(s, c.solver);
    std::string error;
    if (!c.solver.is_valid(&error))
      throw InvalidArgument(fmt::format("{}: {}", where(*solver), in_config_terms(error)));
  }
  if (const toml::table* trainer = top.table("trainer")) parse_trainer(*trainer, c);
  c.trainer.seed = c.seed;
  top.finish();
  return c;
}

std::string in_config_terms(std::string message) {
  // The readers' options that the config has no key for, and the library's names of those it has.
  for (const auto& [cpp, toml] :
       {std::pair<std::string_view, std::string_view>{
            ", or set CsvOptions::allow_non_finite to read it anyway", ""},
        {", or set FannOptions::allow_non_finite to read it anyway", ""},
        {"leave the column out with CsvOptions::columns",
         "leave the column out (name only the columns needed: the config's inputs and targets, "
         "predict's and eval's --columns)"},
        {" (if this first row is a header, set CsvOptions::header to kPresent)",
         " (a header whose names all read as numbers is taken for data: rename its columns)"},
        {"raise num_classes", "raise data.classes"},
        {"set CsvOptions::delimiter to it", "set the data file's delimiter key to it"},
        {"LossOptions::kind", "loss.type"},
        {"SolverOptions::", "solver."},
        {"TrainerOptions::", "trainer."},
        {"LossOptions::", "loss."}}) {
    for (std::size_t at = message.find(cpp); at != std::string::npos; at = message.find(cpp, at))
      message.replace(at, cpp.size(), toml);
  }
  return message;
}

}  // namespace lmtrain::cli
