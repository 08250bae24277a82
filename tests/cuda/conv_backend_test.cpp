// The CUDA backend's convolution and pooling operations against the CPU backend in double
// precision, for float and double, on random inputs; then whole convolutional networks (W4's
// SimpleCNN, a pooling network) whose Jacobians on the GPU must match the fp64 CPU ones.  Every
// test skips when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/cuda_fixture.h"
#include "lmtrain/backend/cuda_backend.h"
#include "support/reference.h"

namespace lmtrain {
namespace {

template <typename T>
constexpr double kTolerance = testing::kCudaTolerance<T>;

// Windows over C × H × W inputs: overlapping, strided, padded, non-square, pointwise.
struct GeometryCase {
  ImageShape input;
  Window2d window;
};
const GeometryCase kGeometries[] = {
    {{2, 6, 5}, Window2d::square(3, 1, 1)},
    {{3, 9, 8}, Window2d::square(4, 2, 0)},
    {{2, 7, 5}, Window2d{3, 2, 2, 1, 1, 0}},
    {{1, 8, 9}, Window2d{3, 4, 2, 3, 1, 1}},
    {{4, 3, 5}, Window2d{}},
    {{1, 28, 28}, Window2d::square(4, 2, 0)},
};

template <typename T>
class CudaConvTest : public testing::CudaVsCpuTest<T> {};

TYPED_TEST_SUITE(CudaConvTest, testing::Precisions, testing::PrecisionName);

TYPED_TEST(CudaConvTest, GemmStridedBatched) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t m = 5, n = 7, k = 6, count = 4;
  for (const Trans ta : {Trans::kNo, Trans::kYes})
    for (const Trans tb : {Trans::kNo, Trans::kYes})
      for (const bool shared_a : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "ta " << (ta == Trans::kYes) << " tb "
                                          << (tb == Trans::kYes) << " shared A " << shared_a);
        // Padded leading dimensions and strides, β ≠ 0.
        const std::size_t lda = (ta == Trans::kNo ? k : m) + 2,
                          ldb = (tb == Trans::kNo ? n : k) + 1;
        const std::size_t ldc = n + 3;
        const std::size_t sa = shared_a ? 0 : (ta == Trans::kNo ? m : k) * lda + 5;
        const std::size_t sb = (tb == Trans::kNo ? k : n) * ldb + 3, sc = m * ldc + 4;
        const std::vector<T> a = this->random(sa * count + 64), b = this->random(sb * count + 64);
        const std::vector<T> c = this->random(sc * count + 64);
        DeviceBuffer<T> da = this->upload(a), db = this->upload(b), dc = this->upload(c);
        gpu.gemm_strided_batched(ta, tb, m, n, k, T(0.75), da.data(), lda, sa, db.data(), ldb, sb,
                                 T(-0.5), dc.data(), ldc, sc, count);
        const std::vector<double> a64 = this->widen(a), b64 = this->widen(b);
        std::vector<double> want = this->widen(c);
        for (std::size_t i = 0; i < count; ++i)
          cpu.gemm(ta, tb, m, n, k, 0.75, a64.data() + i * sa, lda, b64.data() + i * sb, ldb, -0.5,
                   want.data() + i * sc, ldc);
        EXPECT_LE(testing::relative_error(this->download(dc), want), kTolerance<T>);
      }
}

TYPED_TEST(CudaConvTest, Im2colAndItsAdjoint) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t samples = 3;
  for (const auto& [input, window] : kGeometries) {
    const WindowGeometry g = make_window_geometry(input, window);
    SCOPED_TRACE(::testing::Message() << input.channels << "×" << input.height << "×" << input.width
                                      << " k" << g.kernel_h << "×" << g.kernel_w);
    const std::size_t cols_size = samples * g.patch_size() * g.out_spatial();
    const std::vector<T> x = this->random(samples * g.in_size()), cols = this->random(cols_size);
    DeviceBuffer<T> dx = this->upload(x), dcols = this->upload(cols);
    DeviceBuffer<T> got_cols = gpu.allocate(cols_size), got_x = gpu.allocate(x.size());
    gpu.im2col(g, samples, dx.data(), got_cols.data());
    gpu.col2im(g, samples, dcols.data(), got_x.data());
    const std::vector<double> x64 = this->widen(x), cols64 = this->widen(cols);
    std::vector<double> want_cols(cols_size), want_x(x.size());
    cpu.im2col(g, samples, x64.data(), want_cols.data());
    cpu.col2im(g, samples, cols64.data(), want_x.data());
    EXPECT_LE(testing::relative_error(this->download(got_cols), want_cols), kTolerance<T>);
    EXPECT_LE(testing::relative_error(this->download(got_x), want_x), kTolerance<T>);
  }
}

TYPED_TEST(CudaConvTest, ChannelBiasAndChannelSums) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  {
    const std::size_t samples = 4, channels = 5, spatial = 37;
    const std::vector<T> z = this->random(samples * channels * spatial), b = this->random(channels);
    DeviceBuffer<T> dz = this->upload(z), db = this->upload(b);
    gpu.add_channel_bias(samples, channels, spatial, db.data(), dz.data());
    std::vector<double> want = this->widen(z);
    const std::vector<double> b64 = this->widen(b);
    cpu.add_channel_bias(samples, channels, spatial, b64.data(), want.data());
    EXPECT_LE(testing::relative_error(this->download(dz), want), kTolerance<T>) << "bias";
  }
  // Spatial sizes below, at and above a warp; the block sits inside wider J rows.
  for (const std::size_t spatial : {std::size_t{7}, std::size_t{32}, std::size_t{169}}) {
    const std::size_t rows = 9, channels = 6, offset = 3, ldj = offset + channels + 5;
    const std::vector<T> g = this->random(rows * channels * spatial), j = this->random(rows * ldj);
    DeviceBuffer<T> dg = this->upload(g), dj = this->upload(j);
    gpu.channel_sums(rows, channels, spatial, dg.data(), dj.data() + offset, ldj);
    const std::vector<double> g64 = this->widen(g);
    std::vector<double> want = this->widen(j);
    cpu.channel_sums(rows, channels, spatial, g64.data(), want.data() + offset, ldj);
    EXPECT_LE(testing::relative_error(this->download(dj), want), kTolerance<T>)
        << "sums, spatial " << spatial;
  }
}

TYPED_TEST(CudaConvTest, MaxAndAveragePooling) {
  using T = TypeParam;
  auto& gpu = *this->gpu_;
  auto& cpu = *this->cpu_;
  const std::size_t samples = 3, group = 2, rows = samples * group;
  for (const auto& [input, window] : kGeometries) {
    Window2d w = window;
    w.pad_h = std::min(w.pad_h, w.kernel_h / 2);  // pooling's limit
    w.pad_w = std::min(w.pad_w, w.kernel_w / 2);
    const WindowGeometry g = make_window_geometry(input, w);
    SCOPED_TRACE(::testing::Message() << input.channels << "×" << input.height << "×" << input.width
                                      << " k" << g.kernel_h << "×" << g.kernel_w);
    const std::size_t out = g.channels * g.out_spatial();
    const std::vector<T> x = this->random(samples * g.in_size()), seeds = this->random(rows * out);
    const std::vector<double> x64 = this->widen(x), seeds64 = this->widen(seeds);
    DeviceBuffer<T> dx = this->upload(x), dseeds = this->upload(seeds);
    DeviceBuffer<T> dy = gpu.allocate(samples * out), dargmax = gpu.allocate(samples * out);
    DeviceBuffer<T> dgin = gpu.allocate(rows * g.in_size());
    std::vector<double> y(samples * out), argmax(samples * out), gin(rows * g.in_size());

    gpu.max_pool_forward(g, samples, dx.data(), dy.data(), dargmax.data());
    cpu.max_pool_forward(g, samples, x64.data(), y.data(), argmax.data());
    EXPECT_LE(testing::relative_error(this->download(dy), y), kTolerance<T>) << "max forward";
    EXPECT_EQ(this->download(dargmax), argmax) << "argmax";
    gpu.max_pool_backward(g, rows, group, dargmax.data(), dseeds.data(), dgin.data());
    cpu.max_pool_backward(g, rows, group, argmax.data(), seeds64.data(), gin.data());
    EXPECT_LE(testing::relative_error(this->download(dgin), gin), kTolerance<T>) << "max backward";

    gpu.avg_pool_forward(g, samples, dx.data(), dy.data());
    cpu.avg_pool_forward(g, samples, x64.data(), y.data());
    EXPECT_LE(testing::relative_error(this->download(dy), y), kTolerance<T>) << "avg forward";
    gpu.avg_pool_backward(g, rows, dseeds.data(), dgin.data());
    cpu.avg_pool_backward(g, rows, seeds64.data(), gin.data());
    EXPECT_LE(testing::relative_error(this->download(dgin), gin), kTolerance<T>) << "avg backward";
  }
}

// ---- whole networks
// -------------------------------------------------------------------------------

ModelSpec simple_cnn() {
  ModelSpec spec(ImageShape{1, 28, 28});
  spec.conv2d(8, 4, 2).activation(Activation::kElu).conv2d(4, 4, 2).activation(Activation::kElu);
  for (int i = 0; i < 3; ++i) spec.conv2d(4, 2).activation(Activation::kElu);
  return spec.flatten().dense(10);
}

ModelSpec pooling_net() {
  return ModelSpec(ImageShape{2, 12, 11})
      .conv2d(4, 3, 1, 1)
      .activation(Activation::kTanh)
      .max_pool2d(2)
      .conv2d(3, 2)
      .activation(Activation::kTanh)
      .avg_pool2d(Window2d::square(3, 2, 1))
      .flatten()
      .dense(4);
}

template <typename T>
void expect_network_matches_cpu(const ModelSpec& spec, LossKind kind) {
  const std::size_t batch = 9;
  Rng rng(71);
  const auto x = testing::random_vector(batch * spec.inputs(), rng);
  std::vector<double> y(batch * spec.outputs());
  for (std::size_t b = 0; b < batch; ++b)  // one-hot targets suit both losses
    for (std::size_t k = 0; k < spec.outputs(); ++k)
      y[b * spec.outputs() + k] = k == b % 3 ? 1.0 : 0.0;
  LossOptions loss;
  loss.kind = kind;
  testing::Problem<T> gpu(make_cuda_backend<T>(0), spec, loss, x, y, batch);
  testing::Problem<double> cpu(spec, loss, x, y, batch);
  const auto theta = cpu.model->initial_parameters(Init::kTorch, 5);
  EXPECT_LE(testing::relative_error(gpu.residuals(theta), cpu.residuals(theta)), kTolerance<T>);
  // Slices of 4 samples: the last one is partial, and slices start at later samples.
  EXPECT_LE(testing::relative_error(gpu.jacobian(theta, 4), cpu.jacobian(theta)), kTolerance<T>);
}

TYPED_TEST(CudaConvTest, SimpleCnnJacobianMatchesCpu) {
  expect_network_matches_cpu<TypeParam>(simple_cnn(), LossKind::kCrossEntropySqrt);
  expect_network_matches_cpu<TypeParam>(simple_cnn(), LossKind::kMse);
}

TYPED_TEST(CudaConvTest, PoolingNetworkJacobianMatchesCpu) {
  expect_network_matches_cpu<TypeParam>(pooling_net(), LossKind::kMse);
  expect_network_matches_cpu<TypeParam>(pooling_net(), LossKind::kCrossEntropy);
}

}  // namespace
}  // namespace lmtrain
