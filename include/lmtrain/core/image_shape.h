// Shapes of image-like samples and of the sliding windows of convolution and pooling layers.
// A sample is stored flat in NCHW order: value (c, y, x) at (c·H + y)·W + x, so a vector of n
// features is the image n × 1 × 1 and every layer keeps the model's per-sample flat layout.
#pragma once

#include <cstddef>

namespace lmtrain {

struct ImageShape {
  std::size_t channels = 0;
  std::size_t height = 1;
  std::size_t width = 1;

  std::size_t size() const { return channels * height * width; }
  // A plain feature vector (what Dense consumes): height = width = 1.
  bool is_flat() const { return height == 1 && width == 1; }
  bool operator==(const ImageShape&) const = default;
};

// Hyper-parameters of a 2-D sliding window (dilation 1), as PyTorch's Conv2d/MaxPool2d name them.
// Output size per axis: ⌊(in + 2·pad − kernel) / stride⌋ + 1 (PyTorch's floor mode).
struct Window2d {
  std::size_t kernel_h = 1;
  std::size_t kernel_w = 1;
  std::size_t stride_h = 1;
  std::size_t stride_w = 1;
  std::size_t pad_h = 0;
  std::size_t pad_w = 0;

  static Window2d square(std::size_t kernel, std::size_t stride = 1, std::size_t padding = 0) {
    return {kernel, kernel, stride, stride, padding, padding};
  }
  bool operator==(const Window2d&) const = default;
};

// A window sliding over a channels × height × width input: everything the backend's im2col,
// col2im and pooling kernels need, with the output size computed once (make_window_geometry).
// Plain data so it can be passed by value to device kernels.
struct WindowGeometry {
  std::size_t channels = 0;
  std::size_t height = 0;
  std::size_t width = 0;
  std::size_t kernel_h = 1;
  std::size_t kernel_w = 1;
  std::size_t stride_h = 1;
  std::size_t stride_w = 1;
  std::size_t pad_h = 0;
  std::size_t pad_w = 0;
  std::size_t out_height = 0;
  std::size_t out_width = 0;

  std::size_t in_size() const { return channels * height * width; }          // per sample
  std::size_t out_spatial() const { return out_height * out_width; }         // P = Ho·Wo
  std::size_t patch_size() const { return channels * kernel_h * kernel_w; }  // K = C·kh·kw
};

// True when the window fits its padded input (kernel ≤ in + 2·pad on both axes, strides ≥ 1).
inline bool window_fits(const ImageShape& in, const Window2d& w) {
  return w.stride_h > 0 && w.stride_w > 0 && w.kernel_h > 0 && w.kernel_w > 0 &&
         w.kernel_h <= in.height + 2 * w.pad_h && w.kernel_w <= in.width + 2 * w.pad_w;
}

// The geometry of `w` over `in`; the caller checks window_fits first (ModelSpec::validate does).
inline WindowGeometry make_window_geometry(const ImageShape& in, const Window2d& w) {
  WindowGeometry g;
  g.channels = in.channels;
  g.height = in.height;
  g.width = in.width;
  g.kernel_h = w.kernel_h;
  g.kernel_w = w.kernel_w;
  g.stride_h = w.stride_h;
  g.stride_w = w.stride_w;
  g.pad_h = w.pad_h;
  g.pad_w = w.pad_w;
  if (window_fits(in, w)) {
    g.out_height = (in.height + 2 * w.pad_h - w.kernel_h) / w.stride_h + 1;
    g.out_width = (in.width + 2 * w.pad_w - w.kernel_w) / w.stride_w + 1;
  }
  return g;
}

}  // namespace lmtrain
