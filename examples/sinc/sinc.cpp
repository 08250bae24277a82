// W1 of the standard workloads (shared/WORKLOADS.md): fit sinc(10x) on 20 000 points of [−1, 1]
// with a 1-20-1 tanh network, batch 1 000, 50 epochs, multiplicative damping — the
// torch-levenberg-marquardt README example.  Prints progress per epoch and the full report.
//
// usage: sinc_example [--epochs N] [--seed S] [--double] [--damping multiplicative|nielsen]
//                     [--solver auto|cholesky|eigen|dual]
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string>
#include <string_view>

#include "lmtrain/lmtrain.h"

namespace {

struct Args {
  int epochs = 50;
  std::uint64_t seed = 0;
  bool use_double = false;
  std::string damping = "multiplicative";
  std::string solver = "auto";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw lmtrain::InvalidArgument(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--epochs")
      a.epochs = std::stoi(value());
    else if (arg == "--seed")
      a.seed = std::stoull(value());
    else if (arg == "--double")
      a.use_double = true;
    else if (arg == "--damping")
      a.damping = value();
    else if (arg == "--solver")
      a.solver = value();
    else
      throw lmtrain::InvalidArgument(fmt::format(
          "unknown argument '{}'; usage: sinc_example [--epochs N] [--seed S] [--double] "
          "[--damping multiplicative|nielsen] [--solver auto|cholesky|eigen|dual]",
          arg));
  }
  return a;
}

template <typename T>
int run(const Args& args) {
  constexpr std::size_t kSamples = 20000;
  lmtrain::Dataset<T> data(kSamples, 1, 1);
  for (std::size_t i = 0; i < kSamples; ++i) {
    const double x = -1.0 + 2.0 * static_cast<double>(i) / (kSamples - 1);
    const double t = std::numbers::pi * 10.0 * x;
    data.x[i] = static_cast<T>(x);
    data.y[i] = static_cast<T>(t == 0 ? 1.0 : std::sin(t) / t);
  }
  const auto spec = lmtrain::ModelSpec::mlp(1, {20}, 1, lmtrain::Activation::kTanh);
  lmtrain::SolverOptions solver;
  const auto damping = lmtrain::parse_damping(args.damping);
  const auto linear = lmtrain::parse_linear_solver(args.solver);
  if (!damping || !linear)
    throw lmtrain::InvalidArgument(
        "--damping must be multiplicative|nielsen and --solver "
        "auto|cholesky|eigen|dual");
  solver.damping = *damping;
  solver.linear_solver = *linear;
  lmtrain::TrainerOptions trainer;
  trainer.max_epochs = args.epochs;
  trainer.batch_size = 1000;
  trainer.seed = args.seed;

  auto backend = lmtrain::make_cpu_backend<T>();
  lmtrain::Trainer<T> train(spec, lmtrain::LossOptions{}, solver, trainer, *backend);
  std::vector<T> params =
      lmtrain::Sequential<T>(spec, *backend).initial_parameters(lmtrain::Init::kTorch, args.seed);
  const lmtrain::Summary summary = train.fit(params, data);
  fmt::print("{:>6} {:>14} {:>11} {:>9} {:>9}\n", "epoch", "train MSE", "lambda", "accepted",
             "seconds");
  for (const auto& e : summary.history)
    fmt::print("{:>6} {:>14.6e} {:>11.3e} {:>9} {:>9.3f}\n", e.epoch, e.training_loss, e.lambda,
               e.accepted, e.seconds);
  fmt::print("{}", summary.full_report());
  return summary.termination == lmtrain::TerminationReason::kNonFiniteObjective ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    return args.use_double ? run<double>(args) : run<float>(args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "sinc_example: error: {}\n", e.what());
    return 2;
  }
}
