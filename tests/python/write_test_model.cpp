// Writes the fixtures of test_model_file.py into the directory given as the only argument:
//   mlp.safetensors   a dense network with every activation, F64 parameters, normalization of
//                     inputs and targets
//   conv.safetensors  a convolutional network (conv2d with and without bias, max and average
//                     pooling with padding, flatten, dense), F32 parameters
// and for each <name>: <name>_inputs.npy (raw inputs, rows × features in NCHW order) and
// <name>_outputs.npy, lmtrain's prediction in target units: input normalization, the
// Sequential<double> forward pass on the CPU backend, then target de-normalization.  The F32
// model is evaluated in double with its parameters rounded to float, exactly what the file holds.
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/io/npy_writer.h"
#include "lmtrain/nn/sequential.h"
#include "lmtrain/records/model_file.h"

namespace {

using lmtrain::Activation;
using lmtrain::ImageShape;
using lmtrain::ModelSpec;
using lmtrain::Window2d;
using lmtrain::io::ModelFile;

std::vector<double> predict(const ModelFile& model, std::vector<double> x, std::size_t rows) {
  lmtrain::io::apply_input_normalization<double>(model.normalization, x);
  auto backend = lmtrain::make_cpu_backend<double>();
  lmtrain::Sequential<double> net(model.architecture, *backend);
  auto params = backend->allocate(model.parameters.size());
  backend->copy_from_host(model.parameters.data(), params.data(), model.parameters.size());
  auto inputs = backend->allocate(x.size());
  backend->copy_from_host(x.data(), inputs.data(), x.size());
  lmtrain::ForwardState<double> state;
  net.reserve(state, rows);
  const double* out = net.forward(params.data(), inputs.data(), rows, state, false);
  std::vector<double> y(rows * net.outputs());
  backend->copy_to_host(out, y.data(), y.size());
  backend->synchronize();
  lmtrain::io::undo_target_normalization<double>(model.normalization, y);
  return y;
}

void write_case(const std::string& dir, const std::string& name, const ModelSpec& spec,
                bool as_float, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> positive(0.3, 3.0);

  ModelFile model;
  model.architecture = spec;
  auto backend = lmtrain::make_cpu_backend<double>();
  // Torch initialization, widened so that every activation works outside its linear range.
  model.parameters =
      lmtrain::Sequential<double>(spec, *backend).initial_parameters(lmtrain::Init::kTorch, seed);
  for (double& p : model.parameters) {
    p *= 1.5;
    if (as_float) p = static_cast<double>(static_cast<float>(p));
  }
  for (std::size_t c = 0; c < spec.inputs(); ++c) {
    model.normalization.inputs.mean.push_back(5.0 * normal(rng));
    model.normalization.inputs.scale.push_back(positive(rng));
  }
  for (std::size_t c = 0; c < spec.outputs(); ++c) {
    model.normalization.targets.mean.push_back(10.0 * normal(rng));
    model.normalization.targets.scale.push_back(positive(rng));
  }
  model.loss = "mse";
  model.provenance = lmtrain::io::make_provenance();
  model.provenance["seed"] = seed;
  model.provenance["purpose"] = "tests/python/test_model_file.py";

  const std::size_t rows = 37;
  std::vector<double> x(rows * spec.inputs());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i % spec.inputs();
    x[i] = model.normalization.inputs.mean[c] +
           1.5 * model.normalization.inputs.scale[c] * normal(rng);
  }
  const std::vector<double> y = predict(model, x, rows);

  lmtrain::io::write_model_file(
      dir + "/" + name + ".safetensors", model,
      as_float ? lmtrain::io::ParameterDtype::kF32 : lmtrain::io::ParameterDtype::kF64);
  const std::size_t x_shape[] = {rows, spec.inputs()};
  const std::size_t y_shape[] = {rows, spec.outputs()};
  lmtrain::io::write_npy<double>(dir + "/" + name + "_inputs.npy", x, x_shape);
  lmtrain::io::write_npy<double>(dir + "/" + name + "_outputs.npy", y, y_shape);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    write_case(dir, "mlp",
               ModelSpec(3)
                   .dense(16)
                   .activation(Activation::kTanh)
                   .dense(12)
                   .activation(Activation::kSigmoid)
                   .dense(10)
                   .activation(Activation::kRelu)
                   .dense(9)
                   .activation(Activation::kElu)
                   .dense(8)
                   .activation(Activation::kGelu)
                   .dense(7)
                   .activation(Activation::kSoftplus)
                   .dense(6)
                   .activation(Activation::kSin)
                   .dense(5)
                   .activation(Activation::kIdentity)
                   .dense(2),
               false, 2024);
    // 2×9×8 → conv 3×3 p1 → 4×9×8 → max_pool 2 → 4×4×4 → conv 2×3 s(2,1) p(0,1), no bias →
    // 3×2×4 → avg_pool 2 s1 p1 → 3×3×5 → flatten 45 → dense 5 → dense 2.
    write_case(dir, "conv",
               ModelSpec(ImageShape{2, 9, 8})
                   .conv2d(4, 3, 1, 1)
                   .activation(Activation::kRelu)
                   .max_pool2d(2)
                   .conv2d(3, Window2d{2, 3, 2, 1, 0, 1}, false)
                   .activation(Activation::kTanh)
                   .avg_pool2d(Window2d{2, 2, 1, 1, 1, 1})
                   .flatten()
                   .dense(5)
                   .activation(Activation::kSigmoid)
                   .dense(2),
               true, 7);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_test_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
