// Convolution, pooling and flatten layers: shape inference and validation of the spec, forward
// passes against direct loops written here, structural Jacobians against central differences in
// double precision (random inputs, weights and targets), and float against double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <ostream>
#include <string>

#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/conv_loops.h"
#include "lmtrain/nn/conv2d.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

// ---- references
// -----------------------------------------------------------------------------------

// Direct convolution of NCHW samples, parameters in PyTorch's order (W: out × in × kh × kw, b).
std::vector<double> direct_conv2d(const std::vector<double>& x, std::size_t batch, ImageShape in,
                                  std::size_t out_channels, Window2d w, bool bias,
                                  const std::vector<double>& theta) {
  const auto span = [](std::size_t n, std::size_t pad, std::size_t k, std::size_t s) {
    return (n + 2 * pad - k) / s + 1;
  };
  const std::size_t ho = span(in.height, w.pad_h, w.kernel_h, w.stride_h);
  const std::size_t wo = span(in.width, w.pad_w, w.kernel_w, w.stride_w);
  const std::size_t weights = out_channels * in.channels * w.kernel_h * w.kernel_w;
  std::vector<double> out(batch * out_channels * ho * wo);
  for (std::size_t s = 0; s < batch; ++s)
    for (std::size_t o = 0; o < out_channels; ++o)
      for (std::size_t oy = 0; oy < ho; ++oy)
        for (std::size_t ox = 0; ox < wo; ++ox) {
          double z = bias ? theta[weights + o] : 0.0;
          for (std::size_t c = 0; c < in.channels; ++c)
            for (std::size_t i = 0; i < w.kernel_h; ++i)
              for (std::size_t j = 0; j < w.kernel_w; ++j) {
                const long y = static_cast<long>(oy * w.stride_h + i) - static_cast<long>(w.pad_h);
                const long xx = static_cast<long>(ox * w.stride_w + j) - static_cast<long>(w.pad_w);
                if (y < 0 || xx < 0 || y >= static_cast<long>(in.height) ||
                    xx >= static_cast<long>(in.width))
                  continue;
                z += theta[((o * in.channels + c) * w.kernel_h + i) * w.kernel_w + j] *
                     x[s * in.size() + (c * in.height + static_cast<std::size_t>(y)) * in.width +
                       static_cast<std::size_t>(xx)];
              }
          out[((s * out_channels + o) * ho + oy) * wo + ox] = z;
        }
  return out;
}

// Direct max (or average, padding counted as zeros) pooling.
std::vector<double> direct_pool2d(const std::vector<double>& x, std::size_t batch, ImageShape in,
                                  Window2d w, bool max) {
  const std::size_t ho = (in.height + 2 * w.pad_h - w.kernel_h) / w.stride_h + 1;
  const std::size_t wo = (in.width + 2 * w.pad_w - w.kernel_w) / w.stride_w + 1;
  std::vector<double> out(batch * in.channels * ho * wo);
  for (std::size_t s = 0; s < batch; ++s)
    for (std::size_t c = 0; c < in.channels; ++c)
      for (std::size_t oy = 0; oy < ho; ++oy)
        for (std::size_t ox = 0; ox < wo; ++ox) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          for (std::size_t i = 0; i < w.kernel_h; ++i)
            for (std::size_t j = 0; j < w.kernel_w; ++j) {
              const long y = static_cast<long>(oy * w.stride_h + i) - static_cast<long>(w.pad_h);
              const long xx = static_cast<long>(ox * w.stride_w + j) - static_cast<long>(w.pad_w);
              if (y < 0 || xx < 0 || y >= static_cast<long>(in.height) ||
                  xx >= static_cast<long>(in.width))
                continue;
              const double v =
                  x[s * in.size() + (c * in.height + static_cast<std::size_t>(y)) * in.width +
                    static_cast<std::size_t>(xx)];
              acc = max ? std::max(acc, v) : acc + v;
            }
          if (!max) acc /= static_cast<double>(w.kernel_h * w.kernel_w);
          out[((s * in.channels + c) * ho + oy) * wo + ox] = acc;
        }
  return out;
}

// cuPyLMA's SimpleCNN (WORKLOADS.md W4) on 28×28 images.
ModelSpec simple_cnn() {
  ModelSpec spec(ImageShape{1, 28, 28});
  spec.conv2d(8, 4, 2).activation(Activation::kElu).conv2d(4, 4, 2).activation(Activation::kElu);
  for (int i = 0; i < 3; ++i) spec.conv2d(4, 2).activation(Activation::kElu);
  return spec.flatten().dense(10);
}

void expect_invalid(const ModelSpec& spec, const std::vector<std::string>& fragments) {
  try {
    spec.validate();
    ADD_FAILURE() << "validate() accepted " << spec.describe();
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(message.find(f), std::string::npos) << "\"" << f << "\" not in: " << message;
  }
}

// ---- the spec -----------------------------------------------------------------------------------

TEST(ConvSpec, SimpleCnnHasTheShapesAndThe1026ParametersOfW4) {
  const ModelSpec spec = simple_cnn();
  EXPECT_NO_THROW(spec.validate());
  const std::vector<ImageShape> expected = {{8, 13, 13}, {8, 13, 13}, {4, 5, 5},  {4, 5, 5},
                                            {4, 4, 4},   {4, 4, 4},   {4, 3, 3},  {4, 3, 3},
                                            {4, 2, 2},   {4, 2, 2},   {16, 1, 1}, {10, 1, 1}};
  EXPECT_EQ(spec.output_shapes(), expected);
  // conv 8·1·16 + 8, conv 4·8·16 + 4, 3 × (conv 4·4·4 + 4), dense 16·10 + 10.
  EXPECT_EQ(spec.num_params(), 136u + 516u + 3u * 68u + 170u);
  EXPECT_EQ(spec.num_params(), 1026u);
  EXPECT_EQ(spec.layer_params(2), 516u);
  EXPECT_EQ(spec.inputs(), 784u);
  EXPECT_EQ(spec.outputs(), 10u);
  Sequential<double> model(spec, *make_cpu_backend<double>());
  EXPECT_EQ(model.num_params(), 1026u);
  EXPECT_EQ(model.max_width(), 8u * 13 * 13);
  EXPECT_EQ(spec.describe(),
            "1×28×28 → conv2d 8 k4 s2 → 8×13×13 → elu → conv2d 4 k4 s2 → 4×5×5 → elu → conv2d 4 "
            "k2 → 4×4×4 → elu → conv2d 4 k2 → 4×3×3 → elu → conv2d 4 k2 → 4×2×2 → elu → flatten "
            "→ 16 → dense 10 (1026 parameters)");
}

TEST(ConvSpec, FlatInputsKeepTheirMeaningAndDescription) {
  const ModelSpec mlp = ModelSpec::mlp(3, {7, 5}, 2, Activation::kTanh);
  EXPECT_EQ(mlp.input_shape(), (ImageShape{3, 1, 1}));
  EXPECT_EQ(mlp.describe(), "3-7-5-2 tanh,tanh (80 parameters)");
  // A flat input is the image n × 1 × 1: pointwise convolutions apply to it.
  const ModelSpec pointwise = ModelSpec(6).conv2d(4, 1).activation(Activation::kTanh).dense(2);
  EXPECT_NO_THROW(pointwise.validate());
  EXPECT_EQ(pointwise.outputs(), 2u);
  EXPECT_EQ(pointwise.num_params(), 4u * 6 + 4 + 4 * 2 + 2);
}

TEST(ConvSpec, PoolingShapesFollowPyTorchFloorMode) {
  ModelSpec spec(ImageShape{2, 9, 7});
  spec.max_pool2d(2).avg_pool2d(Window2d{3, 2, 1, 2, 1, 0}).flatten().dense(1);
  const auto shapes = spec.output_shapes();
  EXPECT_EQ(shapes[0], (ImageShape{2, 4, 3}));  // ⌊(9 − 2)/2⌋ + 1, ⌊(7 − 2)/2⌋ + 1
  EXPECT_EQ(shapes[1], (ImageShape{2, 4, 1}));  // (4 + 2 − 3)/1 + 1, (3 − 2)/2 + 1
  EXPECT_EQ(shapes[2], (ImageShape{8, 1, 1}));
  EXPECT_EQ(spec.num_params(), 9u);
}

TEST(ConvSpec, ValidateNamesTheLayerAndTheInconsistentSizes) {
  expect_invalid(
      ModelSpec(ImageShape{1, 5, 5}).conv2d(2, 3).activation(Activation::kTanh).conv2d(2, 4),
      {"layer 2", "conv2d", "kernel 4×4", "padded input 3×3", "input 2×3×3"});
  expect_invalid(ModelSpec(784).conv2d(8, 4, 2), {"layer 0", "784×1×1", "ImageShape"});
  expect_invalid(ModelSpec(ImageShape{1, 6, 6}).conv2d(2, 3).dense(3),
                 {"layer 1", "dense", "2×4×4", "flatten()"});
  expect_invalid(ModelSpec(ImageShape{1, 6, 6}).conv2d(0, 3), {"layer 0", "out_channels = 0"});
  expect_invalid(ModelSpec(ImageShape{1, 6, 6}).conv2d(2, 3, 0), {"layer 0", "stride 0×0"});
  expect_invalid(ModelSpec(ImageShape{1, 6, 6}).conv2d(2, 3).max_pool2d(Window2d{2, 2, 2, 2, 2, 0}),
                 {"layer 1", "max_pool2d", "padding 2×0", "kernel 2×2"});
  expect_invalid(ModelSpec(ImageShape{1, 6, 6}).max_pool2d(2).flatten(), {"no dense or conv2d"});
  expect_invalid(ModelSpec(ImageShape{0, 6, 6}).conv2d(2, 3), {"inputs = 0"});
  // Padding makes a large kernel fit.
  EXPECT_NO_THROW(ModelSpec(ImageShape{1, 2, 2}).conv2d(1, 4, 1, 1).validate());
}

TEST(ConvSpec, MaxPoolIndicesMustBeExactInFloat) {
  const ModelSpec big = ModelSpec(ImageShape{1, 4097, 4097}).max_pool2d(2).flatten().dense(1);
  EXPECT_THROW((Sequential<float>(big, *make_cpu_backend<float>())), InvalidArgument);
}

// ---- forward passes -----------------------------------------------------------------------------

struct ConvCase {
  const char* name;
  ImageShape input;
  std::size_t out_channels;
  Window2d window;
  bool bias;
};

// The brief's combinations plus non-square kernels, strides and paddings, a pointwise kernel and
// a convolution without bias.
const ConvCase kConvCases[] = {
    {"k3s1p1", {2, 6, 5}, 3, Window2d::square(3, 1, 1), true},
    {"k4s2p0", {2, 9, 8}, 3, Window2d::square(4, 2, 0), true},
    {"k2s1p0", {3, 4, 5}, 2, Window2d::square(2, 1, 0), true},
    {"nonsquare", {2, 7, 5}, 3, Window2d{3, 2, 2, 1, 1, 0}, true},
    {"strided_padded", {1, 8, 9}, 2, Window2d{3, 4, 2, 3, 2, 1}, true},
    {"pointwise", {4, 3, 5}, 3, Window2d{}, true},
    {"no_bias", {2, 5, 5}, 2, Window2d::square(3, 2, 1), false},
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name;
}

class ConvLayer : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvLayer, ForwardMatchesDirectConvolution) {
  const ConvCase& c = GetParam();
  const std::size_t batch = 3;
  const ModelSpec spec = ModelSpec(c.input).conv2d(c.out_channels, c.window, c.bias);
  Rng rng(17);
  const auto x = random_vector(batch * c.input.size(), rng);
  Problem<double> p(spec, LossOptions{}, x, std::vector<double>(batch * spec.outputs(), 0.0),
                    batch);
  const auto theta = random_vector(spec.num_params(), rng);
  const auto want = direct_conv2d(x, batch, c.input, c.out_channels, c.window, c.bias, theta);
  EXPECT_LE(relative_error(p.outputs(theta), want), 1e-14);

  Problem<float> pf(spec, LossOptions{}, x, std::vector<double>(batch * spec.outputs(), 0.0),
                    batch);
  EXPECT_LE(relative_error(pf.outputs(theta), want), 1e-6);
}

// ---- Jacobians against central differences
// --------------------------------------------------------

constexpr std::size_t kBatch = 4;

struct Case {
  ModelSpec spec;
  LossOptions loss;
  std::vector<double> x, y, theta;
};

Case make_case(const ModelSpec& spec, LossKind kind, std::uint64_t seed,
               std::size_t batch = kBatch) {
  Rng rng(seed);
  LossOptions loss;
  loss.kind = kind;
  Case c{spec, loss, random_vector(batch * spec.inputs(), rng), {}, {}};
  const std::size_t outputs = spec.outputs();
  if (kind == LossKind::kCrossEntropy || kind == LossKind::kCrossEntropySqrt) {
    c.y.resize(batch * outputs);
    for (std::size_t b = 0; b < batch; ++b) {
      double sum = 0;
      for (std::size_t k = 0; k < outputs; ++k) sum += (c.y[b * outputs + k] = rng.uniform() + 0.1);
      for (std::size_t k = 0; k < outputs; ++k) c.y[b * outputs + k] /= sum;
    }
  } else {
    c.y = random_vector(batch * outputs, rng);
  }
  // PyTorch-like magnitudes (the scale the layers are trained at) with nonzero biases.
  Sequential<double> probe(spec, *make_cpu_backend<double>());
  c.theta = probe.initial_parameters(Init::kTorch, seed);
  return c;
}

void expect_jacobian_matches_differences(const Case& c, std::size_t batch = kBatch) {
  Problem<double> p(c.spec, c.loss, c.x, c.y, batch);
  const auto fd = central_differences([&](const auto& t) { return p.residuals(t); }, c.theta);
  EXPECT_LE(relative_error(p.jacobian(c.theta), fd), 1e-6)
      << c.spec.describe() << " loss " << to_string(c.loss.kind);
}

// The convolution under test sits behind a pointwise one, so its backward (seeds to its input)
// is exercised as well as its Jacobian block; mse gives `outputs` residual rows per sample
// (rows share a sample's columns), cross_entropy_sqrt one.
ModelSpec behind_pointwise(const ConvCase& c) {
  return ModelSpec(c.input)
      .conv2d(2, 1)
      .activation(Activation::kTanh)
      .conv2d(c.out_channels, c.window, c.bias)
      .activation(Activation::kTanh)
      .flatten()
      .dense(3);
}

TEST_P(ConvLayer, JacobianMatchesCentralDifferencesMse) {
  expect_jacobian_matches_differences(make_case(behind_pointwise(GetParam()), LossKind::kMse, 31));
}

TEST_P(ConvLayer, JacobianMatchesCentralDifferencesCrossEntropySqrt) {
  expect_jacobian_matches_differences(
      make_case(behind_pointwise(GetParam()), LossKind::kCrossEntropySqrt, 32));
}

TEST_P(ConvLayer, FirstLayerJacobianMatchesCentralDifferences) {
  const ConvCase& c = GetParam();
  const ModelSpec spec = ModelSpec(c.input)
                             .conv2d(c.out_channels, c.window, c.bias)
                             .activation(Activation::kSigmoid)
                             .flatten()
                             .dense(2);
  expect_jacobian_matches_differences(make_case(spec, LossKind::kMse, 33));
}

TEST_P(ConvLayer, BackwardIsTheAdjointOfForward) {
  // The seeds' backward pass (Wᵀ per position, then col2im) is the adjoint of the forward pass's
  // linear part: ⟨g, z(x) − z(0)⟩ = ⟨backward(g), x⟩ for random x and g, on every geometry —
  // padded ones included, which the Jacobian tests above only place first (no backward).
  const ConvCase& c = GetParam();
  const std::size_t samples = 3;
  auto backend = make_cpu_backend<double>();
  const Conv2d<double> layer(c.input, c.out_channels, c.window, c.bias);
  Rng rng(67);
  const auto params = random_vector(layer.num_params(), rng);
  const auto x = random_vector(samples * layer.inputs(), rng);
  const auto g = random_vector(samples * layer.outputs(), rng);
  std::vector<double> z(samples * layer.outputs()), z0(z.size());
  const std::vector<double> zeros(x.size(), 0.0);
  layer.forward(*backend, params.data(), x.data(), samples, z.data(), nullptr);
  layer.forward(*backend, params.data(), zeros.data(), samples, z0.data(), nullptr);
  std::vector<double> g_out = g, g_in(x.size());
  const double* back =
      layer.backward(*backend, params.data(), nullptr, samples, 1, g_out.data(), g_in.data());
  double lhs = 0, rhs = 0, scale = 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    lhs += g[i] * (z[i] - z0[i]);
    scale += std::fabs(g[i] * (z[i] - z0[i]));
  }
  for (std::size_t i = 0; i < x.size(); ++i) rhs += back[i] * x[i];
  ASSERT_GT(scale, 1.0) << "a product large enough to compare";
  EXPECT_LE(std::fabs(lhs - rhs), 1e-13 * scale);
}

TEST_P(ConvLayer, FloatAgreesWithDouble) {
  const Case c = make_case(behind_pointwise(GetParam()), LossKind::kMse, 34);
  Problem<double> pd(c.spec, c.loss, c.x, c.y, kBatch);
  Problem<float> pf(c.spec, c.loss, c.x, c.y, kBatch);
  EXPECT_LE(relative_error(pf.jacobian(c.theta), pd.jacobian(c.theta)), 1e-5);
  EXPECT_LE(relative_error(pf.residuals(c.theta), pd.residuals(c.theta)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvLayer, ::testing::ValuesIn(kConvCases),
                         [](const auto& test_param) { return std::string(test_param.param.name); });

// ---- pooling ------------------------------------------------------------------------------------

struct PoolCase {
  const char* name;
  bool max;
  Window2d window;
};

const PoolCase kPoolCases[] = {
    {"max_k2s2", true, Window2d::square(2, 2)},
    {"max_overlapping_k3s1", true, Window2d::square(3, 1)},
    {"max_padded_k3s2p1", true, Window2d::square(3, 2, 1)},
    {"max_nonsquare", true, Window2d{2, 3, 1, 2, 1, 1}},
    {"avg_k2s2", false, Window2d::square(2, 2)},
    {"avg_overlapping_k3s1", false, Window2d::square(3, 1)},
    {"avg_padded_k3s2p1", false, Window2d::square(3, 2, 1)},
    {"avg_nonsquare", false, Window2d{2, 3, 1, 2, 1, 1}},
};

void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << c.name;
}

class PoolLayer : public ::testing::TestWithParam<PoolCase> {};

ModelSpec& add_pool(ModelSpec& spec, const PoolCase& c) {
  return c.max ? spec.max_pool2d(c.window) : spec.avg_pool2d(c.window);
}

TEST_P(PoolLayer, ForwardMatchesDirectPooling) {
  const PoolCase& c = GetParam();
  const ImageShape in{3, 7, 6};
  const std::size_t batch = 3;
  ModelSpec spec(in);
  add_pool(spec, c).flatten().dense(2);
  Rng rng(5);
  const auto x = random_vector(batch * in.size(), rng);
  // The pooled values are layer 0's outputs in the forward state.
  Problem<double> p(spec, LossOptions{}, x, random_vector(batch * 2, rng), batch);
  p.set_params(random_vector(spec.num_params(), rng));
  ForwardState<double> state;
  p.model->forward(p.params.data(), p.x.data(), batch, state, true);
  const std::size_t pooled = p.model->layers()[0]->outputs();
  const auto got = p.download(state.outputs[0].data(), batch * pooled);
  EXPECT_LE(relative_error(got, direct_pool2d(x, batch, in, c.window, c.max)), 1e-15);
}

// Pooling between two convolutions: seeds pass through it (backward) into the first one.
ModelSpec pool_between_convs(const PoolCase& c) {
  ModelSpec spec(ImageShape{2, 8, 7});
  spec.conv2d(3, 2).activation(Activation::kTanh);
  add_pool(spec, c);
  return spec.conv2d(2, 2, 1, 1).activation(Activation::kTanh).flatten().dense(3);
}

TEST_P(PoolLayer, JacobianMatchesCentralDifferencesMse) {
  expect_jacobian_matches_differences(
      make_case(pool_between_convs(GetParam()), LossKind::kMse, 41));
}

TEST_P(PoolLayer, JacobianMatchesCentralDifferencesCrossEntropySqrt) {
  expect_jacobian_matches_differences(
      make_case(pool_between_convs(GetParam()), LossKind::kCrossEntropySqrt, 42));
}

TEST_P(PoolLayer, SlicedRowsEqualOneSlice) {
  // Slices start at later samples: the saved argmax of the slice must be the right one.
  const Case c = make_case(pool_between_convs(GetParam()), LossKind::kMse, 43, 5);
  Problem<double> p(c.spec, c.loss, c.x, c.y, 5);
  const auto whole = p.jacobian(c.theta);
  for (std::size_t slice : {1u, 2u, 3u})
    EXPECT_LE(relative_error(p.jacobian(c.theta, slice), whole), 1e-15) << "slice " << slice;
}

INSTANTIATE_TEST_SUITE_P(Windows, PoolLayer, ::testing::ValuesIn(kPoolCases),
                         [](const auto& test_param) { return std::string(test_param.param.name); });

// ---- W4's SimpleCNN -----------------------------------------------------------------------------

class SimpleCnn : public ::testing::TestWithParam<LossKind> {};

TEST_P(SimpleCnn, JacobianMatchesCentralDifferences) {
  expect_jacobian_matches_differences(make_case(simple_cnn(), GetParam(), 51, 3), 3);
}

TEST_P(SimpleCnn, GradientJtrMatchesDifferencesOfObjective) {
  const Case c = make_case(simple_cnn(), GetParam(), 52, 3);
  Problem<double> p(c.spec, c.loss, c.x, c.y, 3);
  const auto fd = central_differences(
      [&](const auto& t) { return std::vector<double>{p.objective(t)}; }, c.theta);
  const auto j = p.jacobian(c.theta);
  const auto r = p.residuals(c.theta);
  std::vector<double> g(c.theta.size(), 0.0);
  for (std::size_t i = 0; i < r.size(); ++i)
    for (std::size_t k = 0; k < g.size(); ++k) g[k] += j[i * g.size() + k] * r[i];
  EXPECT_LE(relative_error(g, fd), 1e-6);
}

TEST_P(SimpleCnn, FloatAgreesWithDouble) {
  const Case c = make_case(simple_cnn(), GetParam(), 53, 6);
  Problem<double> pd(c.spec, c.loss, c.x, c.y, 6);
  Problem<float> pf(c.spec, c.loss, c.x, c.y, 6);
  EXPECT_LE(relative_error(pf.jacobian(c.theta, 4), pd.jacobian(c.theta)), 1e-5);
  EXPECT_LE(relative_error(pf.residuals(c.theta), pd.residuals(c.theta)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Losses, SimpleCnn,
                         ::testing::Values(LossKind::kCrossEntropySqrt, LossKind::kMse),
                         [](const auto& test_param) {
                           return std::string(to_string(test_param.param));
                         });

TEST(SimpleCnnInit, TorchInitUsesTheConvolutionFanIn) {
  const ModelSpec spec = simple_cnn();
  Sequential<double> model(spec, *make_cpu_backend<double>());
  const auto theta = model.initial_parameters(Init::kTorch, 7);
  // Layer 2 is conv 8→4 k4: fan_in = 8·4·4 = 128, so every weight and bias lies in ±1/√128.
  const auto& conv = *model.layers()[2];
  const double bound = 1.0 / std::sqrt(128.0);
  double largest = 0;
  for (std::size_t i = 0; i < conv.num_params(); ++i)
    largest = std::max(largest, std::fabs(theta[conv.param_offset() + i]));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.9 * bound);
}

// ---- chunking of the column workspace
// -------------------------------------------------------------

TEST(Conv2dWorkspace, ChunkedPassesEqualOneChunk) {
  // A workspace cap of two samples' columns makes forward, backward and the Jacobian run in
  // several chunks; they must give what one chunk gives.
  const ImageShape in{2, 6, 5};
  const Window2d w = Window2d::square(3, 1, 1);
  auto backend = make_cpu_backend<double>();
  const Conv2d<double> whole(in, 3, w, true);
  const std::size_t columns = whole.geometry().patch_size() * whole.geometry().out_spatial();
  const Conv2d<double> chunked(in, 3, w, true, 2 * columns);
  EXPECT_EQ(chunked.workspace_elements(), 2 * columns);

  const std::size_t samples = 5, group = 3, rows = samples * group;
  const std::size_t n = whole.num_params(), out = whole.outputs(), ldj = n + 4;
  Rng rng(61);
  const auto params = random_vector(n, rng), x = random_vector(samples * in.size(), rng);
  const auto seeds = random_vector(rows * out, rng);

  auto run = [&](const Conv2d<double>& layer) {
    std::vector<double> z(samples * out), g_out = seeds, g_in(rows * in.size());
    std::vector<double> j(rows * ldj, 0.0);
    layer.forward(*backend, params.data(), x.data(), samples, z.data(), nullptr);
    layer.assemble_jacobian(*backend, x.data(), samples, group, g_out.data(), j.data(), ldj);
    const double* gi =
        layer.backward(*backend, params.data(), nullptr, samples, group, g_out.data(), g_in.data());
    std::vector<double> all = z;
    all.insert(all.end(), gi, gi + rows * in.size());
    all.insert(all.end(), j.begin(), j.end());
    return all;
  };
  EXPECT_LE(relative_error(run(chunked), run(whole)), 1e-15);
}

// ---- the CPU's direct forward kernel on every SIMD path
// ---------------------------------------------------------------------------------------------

// W4's two large layers, padding, non-square windows and strides, output counts that leave every
// remainder of the kernel's 8- and 4-row blocks (1, 13, 32), P from 1 to 169 (tails of every
// length), and no bias.
const ConvCase kDirectCases[] = {
    {"w4_conv1", {1, 28, 28}, 8, Window2d::square(4, 2), true},
    {"w4_conv2", {8, 13, 13}, 4, Window2d::square(4, 2), true},
    {"padded_13", {3, 9, 11}, 13, Window2d{3, 2, 1, 2, 1, 0}, true},
    {"one_output", {2, 5, 5}, 1, Window2d::square(5, 1, 2), true},
    {"p1_32", {4, 3, 3}, 32, Window2d::square(3), true},
    {"no_bias_7", {2, 6, 7}, 7, Window2d::square(2, 1, 1), false},
};

template <typename T>
void check_direct_forward(cpu::SimdPath path, const ConvCase& c) {
  const WindowGeometry g = make_window_geometry(c.input, c.window);
  const std::size_t samples = 5, K = g.patch_size(), P = g.out_spatial(), O = c.out_channels;
  const std::size_t weights = O * K;
  Rng rng(O * 977 + K * 31 + P);
  const auto x = random_vector(samples * c.input.size(), rng);
  const auto theta = random_vector(weights + O, rng);
  const auto want = direct_conv2d(x, samples, c.input, O, c.window, c.bias, theta);
  const std::vector<T> xt(x.begin(), x.end()), wt(theta.begin(), theta.end());
  // Columns for two threads, NaN to start with: neither the row tails nor stale columns may leak.
  const std::size_t cols_elements = 2 * K * cpu::conv_column_stride<T>(P);
  std::vector<T> cols(cols_elements, std::numeric_limits<T>::quiet_NaN());
  std::vector<T> z(samples * O * P, std::numeric_limits<T>::quiet_NaN());
  const bool ran = cpu::conv2d_forward_direct(path, g, O, samples, xt.data(), wt.data(),
                                              c.bias ? wt.data() + weights : nullptr, z.data(),
                                              cols.data(), cols_elements);
  if (path == cpu::SimdPath::kBaseline) {  // the GEMM path's: nothing written
    EXPECT_FALSE(ran);
    for (const T v : z) ASSERT_TRUE(std::isnan(v));
    return;
  }
  ASSERT_TRUE(ran);
  // Each output a sum of K + 1 terms from inputs rounded to T: within (K + 3) ulps of the sum of
  // their magnitudes, |b| + Σ |w||x| (the same convolution of the absolute values).
  auto absolute = [](std::vector<double> v) {
    for (double& e : v) e = std::fabs(e);
    return v;
  };
  const auto magnitudes =
      direct_conv2d(absolute(x), samples, c.input, O, c.window, c.bias, absolute(theta));
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t s = 0; s < samples; ++s)
    for (std::size_t o = 0; o < O; ++o)
      for (std::size_t p = 0; p < P; ++p) {
        const std::size_t e = (s * O + o) * P + p;
        ASSERT_NEAR(static_cast<double>(z[e]), want[e],
                    (static_cast<double>(K) + 3) * eps * magnitudes[e])
            << c.name << ": sample " << s << ", output " << o << ", position " << p;
      }
  // Declined, touching nothing: more than 32 outputs, or columns short of one thread's.
  std::vector<T> untouched(z.size(), T(7));
  EXPECT_FALSE(cpu::conv2d_forward_direct<T>(path, g, 33, 1, xt.data(), wt.data(), nullptr,
                                             untouched.data(), cols.data(), cols_elements));
  EXPECT_FALSE(cpu::conv2d_forward_direct<T>(path, g, O, samples, xt.data(), wt.data(), nullptr,
                                             untouched.data(), cols.data(), K * P - 1));
  for (const T v : untouched) ASSERT_EQ(v, T(7));
}

class DirectConvForward : public ::testing::TestWithParam<cpu::SimdPath> {};

TEST_P(DirectConvForward, MatchesADirectFloat64ConvolutionOrDeclines) {
  const cpu::SimdPath path = GetParam();
  if (!cpu::cpu_has(path))
    GTEST_SKIP() << "this CPU cannot run the " << cpu::to_string(path) << " path";
  for (const ConvCase& c : kDirectCases) {
    check_direct_forward<float>(path, c);
    check_direct_forward<double>(path, c);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPath, DirectConvForward,
                         ::testing::Values(cpu::SimdPath::kBaseline, cpu::SimdPath::kAvx2,
                                           cpu::SimdPath::kAvx512),
                         [](const auto& param_info) {
                           return std::string(cpu::to_string(param_info.param));
                         });

// The backend's own choice, the direct kernel up to 32 outputs and OpenBLAS's GEMMs beyond (and on
// the baseline path), through the layer: both against the direct convolution.
TEST(Conv2dForward, DirectAndGemmPathsOfTheBackendMatchTheDirectConvolution) {
  auto backend = make_cpu_backend<double>();
  const ImageShape in{3, 10, 9};
  const Window2d w = Window2d::square(3, 2, 1);
  for (const std::size_t out : {std::size_t{6}, std::size_t{40}}) {
    const Conv2d<double> layer(in, out, w, true, Conv2d<double>::kCpuWorkspaceElements);
    const std::size_t samples = 9;
    Rng rng(out);
    const auto params = random_vector(layer.num_params(), rng);
    const auto x = random_vector(samples * in.size(), rng);
    std::vector<double> z(samples * layer.outputs());
    layer.forward(*backend, params.data(), x.data(), samples, z.data(), nullptr);
    EXPECT_LE(relative_error(z, direct_conv2d(x, samples, in, out, w, true, params)), 1e-14)
        << out << " outputs";
  }
}

}  // namespace
}  // namespace lmtrain::testing
