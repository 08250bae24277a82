#include "lmtrain/nn/model_spec.h"

#include <fmt/format.h>

#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

std::string shape_string(const ImageShape& s) {
  return fmt::format("{}×{}×{}", s.channels, s.height, s.width);
}

std::string pair_string(std::size_t a, std::size_t b) {
  return a == b ? fmt::format("{}", a) : fmt::format("{}×{}", a, b);
}

bool is_pool(LayerSpec::Kind kind) {
  return kind == LayerSpec::Kind::kMaxPool2d || kind == LayerSpec::Kind::kAvgPool2d;
}

// Why `w` cannot slide over `in` as layer i of kind `kind`, or "" when it can.
std::string window_error(std::size_t i, LayerSpec::Kind kind, const ImageShape& in,
                         const Window2d& w) {
  const std::string name = to_string(kind);
  if (w.kernel_h == 0 || w.kernel_w == 0 || w.stride_h == 0 || w.stride_w == 0)
    return fmt::format("layer {} ({}) has kernel {}×{} and stride {}×{}; both must be ≥ 1", i, name,
                       w.kernel_h, w.kernel_w, w.stride_h, w.stride_w);
  if (is_pool(kind) && (2 * w.pad_h > w.kernel_h || 2 * w.pad_w > w.kernel_w))
    return fmt::format(
        "layer {} ({}) has padding {}×{} larger than half its kernel {}×{}; expected padding ≤ "
        "kernel / 2 (PyTorch's limit: every window must overlap the input)",
        i, name, w.pad_h, w.pad_w, w.kernel_h, w.kernel_w);
  if (!window_fits(in, w)) {
    std::string message = fmt::format(
        "layer {} ({}) has kernel {}×{} larger than its padded input {}×{} (input {}, padding "
        "{}×{})",
        i, name, w.kernel_h, w.kernel_w, in.height + 2 * w.pad_h, in.width + 2 * w.pad_w,
        shape_string(in), w.pad_h, w.pad_w);
    if (in.is_flat())
      message += fmt::format(
          "; a flat vector of {} values is the image {}×1×1 — for image data give the model its "
          "input shape, ModelSpec(ImageShape{{channels, height, width}})",
          in.size(), in.size());
    return message;
  }
  return {};
}

// Shape inference: the output shape of every layer, and the first inconsistency found ("" if none).
struct Inference {
  std::vector<ImageShape> shapes;
  std::string error;
};

Inference infer(const ImageShape& input, const std::vector<LayerSpec>& layers) {
  Inference result;
  ImageShape s = input;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    std::string error;
    switch (l.kind) {
      case LayerSpec::Kind::kDense:
        if (l.units == 0)
          error = fmt::format("layer {} is dense with units = 0; expected ≥ 1", i);
        else if (!s.is_flat())
          error = fmt::format(
              "layer {} (dense) receives a {} image; insert flatten() before it (a dense layer "
              "acts on flat feature vectors, as PyTorch's nn.Linear after nn.Flatten)",
              i, shape_string(s));
        s = {l.units, 1, 1};
        break;
      case LayerSpec::Kind::kActivation:
        break;
      case LayerSpec::Kind::kConv2d: {
        if (l.channels == 0)
          error = fmt::format("layer {} is conv2d with out_channels = 0; expected ≥ 1", i);
        else
          error = window_error(i, l.kind, s, l.window);
        const WindowGeometry g = make_window_geometry(s, l.window);
        s = {l.channels, g.out_height, g.out_width};
        break;
      }
      case LayerSpec::Kind::kMaxPool2d:
      case LayerSpec::Kind::kAvgPool2d: {
        error = window_error(i, l.kind, s, l.window);
        const WindowGeometry g = make_window_geometry(s, l.window);
        s = {s.channels, g.out_height, g.out_width};
        break;
      }
      case LayerSpec::Kind::kFlatten:
        s = {s.size(), 1, 1};
        break;
    }
    if (result.error.empty()) result.error = std::move(error);
    result.shapes.push_back(s);
  }
  return result;
}

std::size_t params_of(const LayerSpec& l, const ImageShape& in) {
  switch (l.kind) {
    case LayerSpec::Kind::kDense:
      return l.units * in.size() + l.units;
    case LayerSpec::Kind::kConv2d:
      return l.channels * in.channels * l.window.kernel_h * l.window.kernel_w +
             (l.bias ? l.channels : 0);
    default:
      return 0;
  }
}

std::string window_label(const LayerSpec& l) {
  const Window2d& w = l.window;
  std::string label = fmt::format("k{}", pair_string(w.kernel_h, w.kernel_w));
  if (w.stride_h != 1 || w.stride_w != 1)
    label += fmt::format(" s{}", pair_string(w.stride_h, w.stride_w));
  if (w.pad_h != 0 || w.pad_w != 0) label += fmt::format(" p{}", pair_string(w.pad_h, w.pad_w));
  return label;
}

}  // namespace

std::string to_string(Init init) {
  switch (init) {
    case Init::kTorch:
      return "torch";
    case Init::kGlorot:
      return "glorot";
    case Init::kHe:
      return "he";
  }
  return "unknown";
}

Init parse_init(const std::string& name) {
  if (name == "torch") return Init::kTorch;
  if (name == "glorot") return Init::kGlorot;
  if (name == "he") return Init::kHe;
  throw InvalidArgument(fmt::format(
      "init = \"{}\" is not known; expected one of \"torch\", \"glorot\", \"he\"", name));
}

std::string to_string(LayerSpec::Kind kind) {
  switch (kind) {
    case LayerSpec::Kind::kDense:
      return "dense";
    case LayerSpec::Kind::kActivation:
      return "activation";
    case LayerSpec::Kind::kConv2d:
      return "conv2d";
    case LayerSpec::Kind::kMaxPool2d:
      return "max_pool2d";
    case LayerSpec::Kind::kAvgPool2d:
      return "avg_pool2d";
    case LayerSpec::Kind::kFlatten:
      return "flatten";
  }
  return "unknown";
}

ModelSpec& ModelSpec::dense(std::size_t units) {
  LayerSpec l;
  l.kind = LayerSpec::Kind::kDense;
  l.units = units;
  layers_.push_back(l);
  return *this;
}

ModelSpec& ModelSpec::activation(Activation f) {
  LayerSpec l;
  l.kind = LayerSpec::Kind::kActivation;
  l.activation = f;
  layers_.push_back(l);
  return *this;
}

ModelSpec& ModelSpec::conv2d(std::size_t out_channels, std::size_t kernel, std::size_t stride,
                             std::size_t padding, bool bias) {
  return conv2d(out_channels, Window2d::square(kernel, stride, padding), bias);
}

ModelSpec& ModelSpec::conv2d(std::size_t out_channels, Window2d window, bool bias) {
  LayerSpec l;
  l.kind = LayerSpec::Kind::kConv2d;
  l.channels = out_channels;
  l.window = window;
  l.bias = bias;
  layers_.push_back(l);
  return *this;
}

ModelSpec& ModelSpec::max_pool2d(std::size_t kernel, std::size_t stride) {
  return max_pool2d(Window2d::square(kernel, stride == 0 ? kernel : stride));
}

ModelSpec& ModelSpec::max_pool2d(Window2d window) {
  LayerSpec l;
  l.kind = LayerSpec::Kind::kMaxPool2d;
  l.window = window;
  layers_.push_back(l);
  return *this;
}

ModelSpec& ModelSpec::avg_pool2d(std::size_t kernel, std::size_t stride) {
  return avg_pool2d(Window2d::square(kernel, stride == 0 ? kernel : stride));
}

ModelSpec& ModelSpec::avg_pool2d(Window2d window) {
  LayerSpec l;
  l.kind = LayerSpec::Kind::kAvgPool2d;
  l.window = window;
  layers_.push_back(l);
  return *this;
}

ModelSpec& ModelSpec::flatten() {
  LayerSpec l;
  l.kind = LayerSpec::Kind::kFlatten;
  layers_.push_back(l);
  return *this;
}

ModelSpec ModelSpec::mlp(std::size_t inputs, const std::vector<std::size_t>& hidden,
                         std::size_t outputs, Activation hidden_activation) {
  ModelSpec spec(inputs);
  for (std::size_t h : hidden) spec.dense(h).activation(hidden_activation);
  spec.dense(outputs);
  return spec;
}

std::vector<ImageShape> ModelSpec::output_shapes() const {
  return infer(input_shape_, layers_).shapes;
}

std::size_t ModelSpec::outputs() const {
  const auto shapes = output_shapes();
  return shapes.empty() ? inputs() : shapes.back().size();
}

std::size_t ModelSpec::layer_params(std::size_t i) const {
  const auto shapes = output_shapes();
  return params_of(layers_.at(i), i == 0 ? input_shape_ : shapes[i - 1]);
}

std::size_t ModelSpec::num_params() const {
  const auto shapes = output_shapes();
  std::size_t n = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    n += params_of(layers_[i], i == 0 ? input_shape_ : shapes[i - 1]);
  return n;
}

ParameterGroups ModelSpec::relevance_groups() const {
  validate();
  const auto shapes = output_shapes();
  ParameterGroups g;
  g.group_of.reserve(num_params());
  auto add_group = [&](std::string name, std::size_t count) {
    const auto id = static_cast<std::uint32_t>(g.names.size());
    g.names.push_back(std::move(name));
    g.sizes.push_back(count);
    g.group_of.insert(g.group_of.end(), count, id);
  };
  bool first = true;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = layers_[i];
    const ImageShape& in = i == 0 ? input_shape_ : shapes[i - 1];
    if (params_of(l, in) == 0) continue;
    const std::string layer = fmt::format("layer {} ({})", i, to_string(l.kind));
    std::size_t outs = 0, per_out = 0, biases = 0;
    if (l.kind == LayerSpec::Kind::kDense) {
      outs = l.units;
      per_out = in.size();
      biases = l.units;
    } else {  // conv2d: W (out × C × kh × kw)
      outs = l.channels;
      per_out = in.channels * l.window.kernel_h * l.window.kernel_w;
      biases = l.bias ? l.channels : 0;
    }
    if (first) {
      // W is out-major, so input i's weights are strided: one group id per input feature
      // (dense) or channel (conv2d), repeated for every output unit.
      const std::size_t features = l.kind == LayerSpec::Kind::kDense ? in.size() : in.channels;
      const std::size_t run = per_out / features;  // consecutive weights of one feature
      const auto base = static_cast<std::uint32_t>(g.names.size());  // 0: nothing precedes
      g.input_groups = features;
      for (std::size_t f = 0; f < features; ++f) {
        g.names.push_back(fmt::format("input {}", f));
        g.sizes.push_back(outs * run);
      }
      for (std::size_t o = 0; o < outs; ++o)
        for (std::size_t f = 0; f < features; ++f)
          g.group_of.insert(g.group_of.end(), run, base + static_cast<std::uint32_t>(f));
      first = false;
    } else {
      add_group(layer + " weights", outs * per_out);
    }
    if (biases > 0) add_group(layer + " bias", biases);
  }
  return g;
}

std::string ModelSpec::describe() const {
  bool flat_mlp = input_shape_.is_flat();
  for (const auto& l : layers_)
    flat_mlp =
        flat_mlp && (l.kind == LayerSpec::Kind::kDense || l.kind == LayerSpec::Kind::kActivation);
  if (flat_mlp) {
    std::string sizes = fmt::format("{}", inputs());
    std::string acts;
    for (const auto& l : layers_) {
      if (l.kind == LayerSpec::Kind::kDense) {
        sizes += fmt::format("-{}", l.units);
      } else {
        if (!acts.empty()) acts += ",";
        acts += std::string(to_string(l.activation));
      }
    }
    return fmt::format("{} {}({} parameters)", sizes, acts.empty() ? "" : acts + " ", num_params());
  }
  const auto shapes = output_shapes();
  std::string text = shape_string(input_shape_);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = layers_[i];
    switch (l.kind) {
      case LayerSpec::Kind::kDense:
        text += fmt::format(" → dense {}", l.units);
        break;
      case LayerSpec::Kind::kActivation:
        text += fmt::format(" → {}", to_string(l.activation));
        break;
      case LayerSpec::Kind::kConv2d:
        text += fmt::format(" → conv2d {} {}{} → {}", l.channels, window_label(l),
                            l.bias ? "" : " no-bias", shape_string(shapes[i]));
        break;
      case LayerSpec::Kind::kMaxPool2d:
      case LayerSpec::Kind::kAvgPool2d:
        text += fmt::format(" → {} {} → {}", to_string(l.kind), window_label(l),
                            shape_string(shapes[i]));
        break;
      case LayerSpec::Kind::kFlatten:
        text += fmt::format(" → flatten → {}", shapes[i].size());
        break;
    }
  }
  return fmt::format("{} ({} parameters)", text, num_params());
}

void ModelSpec::validate() const {
  if (inputs() == 0)
    throw InvalidArgument(
        fmt::format("model: inputs = 0 (input shape {}); a network needs at least one input",
                    shape_string(input_shape_)));
  const Inference inference = infer(input_shape_, layers_);
  if (!inference.error.empty()) throw InvalidArgument("model: " + inference.error);
  bool any_parameters = false;
  for (const auto& l : layers_)
    any_parameters =
        any_parameters || l.kind == LayerSpec::Kind::kDense || l.kind == LayerSpec::Kind::kConv2d;
  if (!any_parameters)
    throw InvalidArgument(
        "model: no dense or conv2d layer; a network needs at least one to have parameters");
}

}  // namespace lmtrain
