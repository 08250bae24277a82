// lmtrain's side of the peer benchmarks (issue 7): runs one standard workload of
// shared/WORKLOADS.md through the public C++ API and prints machine-readable JSON, one object per
// line, that bench/report.py turns into the results table:
//
//   {"type":"step",  ...}   one per LM step: wall seconds since the previous step ended
//   {"type":"epoch", ...}   one per epoch: training loss and wall seconds since training started
//   {"type":"result",...}   the run: losses, median step/epoch time, peak RSS, phase table,
//                           peak device memory and, for W1/W2/W3/W4/W7, the device roofline and
//                           per-phase floors
//
// usage:
//   lmtrain_workloads W1 [--epochs 50] [--seed S] [--double|--mixed|--float32] [--device D]
//   lmtrain_workloads W2 [--epochs 10] [--seed S] [--double|--mixed|--float32] [--device D]
//   lmtrain_workloads W7 [--epochs 200] [--seed S] [--double|--mixed|--float32] [--device D]
//   lmtrain_workloads W3 --width W --depth D --samples S [--repeats 5] [--double] [--device ...]
//   lmtrain_workloads W5 [--width 100] [--rows 100000] [--epochs 4] [--seed S] (W1's options):
//                           dense-large, 8-W-W-1 tanh, full batch (W = 100: n = 11 101; W = 170,
//                           --rows 50000: n = 30 771, the H200 run's sizes)
//   (--device cpu|cuda; default precision: auto, as lmtrain fit; --float32: float32 throughout)
//   (every workload: [--roofline | --no-roofline]; on by default for W1, W2, W3, W4 and W7)
//   (W1/W2/W4/W6: [--solver auto|cholesky|eigen|cg|dual] [--cg-forcing ETA]
//    [--cg-max-iterations K] [--damping multiplicative|nielsen] [--lambda-initial L]
//    [--lambda-increase U] [--lambda-decrease D] (multiplicative's factors)
//    [--per-sample-damping] [--tf32] [--cuda-graphs] [--normal-matrix auto|syrk|split_k]
//    [--geodesic | --no-geodesic] [--geodesic-backoff-max N] [--max-slice-samples N]: every
//    solver option at lmtrain's defaults unless given; --per-sample-damping is
//    SolverOptions::damping_per_sample, the peers' λ on JᵀJ/B; --tf32 is SolverOptions::tf32,
//    A on TF32 tensor cores on CUDA)
//   (W1/W2/W5/W7: [--profile-steps A:B]: the CUDA profiler collects steps A … B only (1-based),
//    for Nsight Compute's --profile-from-start off — scripts/gpu-run.sh's profile stage)
//   lmtrain_workloads W4 [--epochs 5] [--train-rows 6000] [--test-rows 2000] [--data DIR]
//                        [--loss cross_entropy_sqrt|cross_entropy|cross_entropy_sampled] [--seed S]
//                        [--double]
//                        [--device cpu|cuda]
//   lmtrain_workloads W6 --set NAME [--datasets DIR] [--hidden 16] [--budget 5]
//                        [--validation-fraction 0] [--standardize-inputs]
//                        [--regularization none|l2|bayesian|ard] [--seed S] [--double]
//                        [--device cpu|cuda]
//
// The data of W1/W2 are generated here exactly as bench/peers/torch_lm.py generates them, so both
// tools see the same samples: x = linspace(−1, 1, N), y = sinc(10x); the test set is every fourth
// midpoint between consecutive training points (N/4 points never seen in training).  W4 reads the
// first rows of Debian's Fashion-MNIST IDX files and standardizes them as `lmtrain fit` does
// (examples/fashion-cnn/run.toml); bench/peers/torch_lm.py W4 prepares the same tensors.
//
// The device roofline (issue 4; shared/WORKLOADS.md, "physical limits to report against") is
// measured once per process, after the workload, on the workload's own backend and through
// Backend<T> operations only, so the same code measures the CPU and a GPU: the copy bandwidth
// that Jacobian assembly is compared with and the GEMM rate of the precision in use that SYRK is
// compared with.  See measure_roofline() and bench/README.md.
#include <fmt/format.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/io/fann_reader.h"
#include "lmtrain/io/idx_reader.h"
#include "lmtrain/io/standardization.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/nn/jacobian.h"
#include "lmtrain/solve/memory_plan.h"
#include "lmtrain/solve/normal_equations.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/engine_source.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string workload;
  int epochs = -1;  // -1: the workload's default
  std::uint64_t seed = 0;
  bool use_double = false;
  bool mixed = false;    // float32 model, float64 A and solve (precision = "mixed")
  bool float32 = false;  // float32 throughout (precision = "float32"; default: auto)
  std::string device = "cpu";
  std::optional<bool> roofline;  // unset: on for W1, W2 and W3
  // W3
  std::size_t width = 64;
  bool width_given = false;  // W5's default width is 100
  std::size_t depth = 1;
  std::size_t samples = 5000;
  int repeats = 5;
  // W5: 8-width-width-1 tanh on `rows` samples, full batch (width 100: n = 11 101; 170: 30 771)
  std::size_t rows = 100000;
  // W6
  std::string set;
  std::string datasets = "/usr/share/doc/libfann-dev/examples/datasets";
  std::size_t hidden = 16;
  double budget = 5.0;
  double validation_fraction = 0.0;
  bool standardize_inputs = false;  // per-column mean/std of the training split, as `lmtrain fit`
  std::string regularization = "none";  // none | l2 | bayesian | ard
  std::string damping = "nielsen";      // multiplicative | nielsen (lmtrain's default)
  std::optional<bool> geodesic;         // --geodesic / --no-geodesic; unset: lmtrain's auto
  int geodesic_backoff_max = -1;        // -1: SolverOptions' default
  std::string solver = "auto";          // auto | cholesky | eigen | cg | dual
  double cg_forcing = 0.0;              // 0: SolverOptions' default
  // λ as torch-levenberg-marquardt applies it, to JᵀJ/B (B samples per batch):
  // SolverOptions::damping_per_sample, so the ×10 / ×0.1 sequence damps exactly as the peer's.
  bool per_sample_damping = false;
  bool tf32 = false;
  bool cuda_graphs = false;                 // --cuda-graphs: SolverOptions::cuda_graphs
  int profile_first = 0, profile_last = 0;  // --profile-steps A:B (0: none)
  lmtrain::NormalMatrixMethod normal_matrix = lmtrain::NormalMatrixMethod::kAuto;
  double lambda_initial = 0;          // 0: SolverOptions' default
  double lambda_increase = 0;         // 0: SolverOptions' default
  double lambda_decrease = 0;         // 0: SolverOptions' default
  std::size_t cg_max_iterations = 0;  // 0: SolverOptions' default
  std::size_t max_slice_samples = 0;  // 0: the memory plan's slice
  // W4: the first rows of the training and test files (the CI test's subset by default)
  std::size_t train_rows = 6000;
  std::size_t test_rows = 2000;
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string loss = "cross_entropy_sqrt";
};

[[noreturn]] void usage_error(const std::string& what) {
  throw lmtrain::InvalidArgument(fmt::format(
      "{}\nusage: lmtrain_workloads W1|W2|W7 [--epochs N] [--seed S] [--double | --mixed | "
      "--float32] "
      "[--device cpu|cuda]\n"
      "       (every workload: [--roofline | --no-roofline], default on for W1, W2, W3, W4, W7)\n"
      "       (W1/W2/W4/W6: [--solver auto|cholesky|eigen|cg|dual] [--cg-forcing ETA] "
      "[--cg-max-iterations K] [--damping multiplicative|nielsen] [--lambda-initial L] "
      "[--lambda-increase U] [--lambda-decrease D] "
      "[--per-sample-damping] [--tf32] [--cuda-graphs] [--normal-matrix auto|syrk|split_k] "
      "[--geodesic | --no-geodesic] [--geodesic-backoff-max N] [--max-slice-samples N] "
      "[--profile-steps A:B])\n"
      "       lmtrain_workloads W3 --width W --depth D --samples S [--repeats R]\n"
      "       lmtrain_workloads W5 [--width 100] [--rows 100000] [--epochs 4] (and W1's options)\n"
      "       lmtrain_workloads W6 --set NAME [--datasets DIR] [--hidden H] [--budget SECONDS] "
      "[--validation-fraction F] [--standardize-inputs] [--regularization none|l2|bayesian|ard] "
      "[--seed S]\n"
      "       lmtrain_workloads W4 [--epochs N] [--train-rows 6000] [--test-rows 2000] "
      "[--data DIR] [--loss cross_entropy_sqrt|cross_entropy|cross_entropy_sampled]",
      what));
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage_error("missing workload");
  Args a;
  a.workload = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--epochs")
      a.epochs = std::stoi(value());
    else if (arg == "--seed")
      a.seed = std::stoull(value());
    else if (arg == "--double")
      a.use_double = true;
    else if (arg == "--mixed")
      a.mixed = true;
    else if (arg == "--float32")
      a.float32 = true;
    else if (arg == "--device")
      a.device = value();
    else if (arg == "--roofline")
      a.roofline = true;
    else if (arg == "--no-roofline")
      a.roofline = false;
    else if (arg == "--width")
      a.width = std::stoul(value()), a.width_given = true;
    else if (arg == "--depth")
      a.depth = std::stoul(value());
    else if (arg == "--rows")
      a.rows = std::stoul(value());
    else if (arg == "--samples")
      a.samples = std::stoul(value());
    else if (arg == "--repeats")
      a.repeats = std::stoi(value());
    else if (arg == "--set")
      a.set = value();
    else if (arg == "--datasets")
      a.datasets = value();
    else if (arg == "--hidden")
      a.hidden = std::stoul(value());
    else if (arg == "--budget")
      a.budget = std::stod(value());
    else if (arg == "--validation-fraction")
      a.validation_fraction = std::stod(value());
    else if (arg == "--standardize-inputs")
      a.standardize_inputs = true;
    else if (arg == "--regularization")
      a.regularization = value();
    else if (arg == "--damping")
      a.damping = value();
    else if (arg == "--solver")
      a.solver = value();
    else if (arg == "--lambda-initial")
      a.lambda_initial = std::stod(value());
    else if (arg == "--lambda-increase")
      a.lambda_increase = std::stod(value());
    else if (arg == "--lambda-decrease")
      a.lambda_decrease = std::stod(value());
    else if (arg == "--per-sample-damping")
      a.per_sample_damping = true;
    else if (arg == "--tf32")
      a.tf32 = true;
    else if (arg == "--cuda-graphs")
      a.cuda_graphs = true;
    else if (arg == "--profile-steps") {
      const std::string v = value();
      const std::size_t colon = v.find(':');
      try {
        if (colon == std::string::npos) throw std::invalid_argument(v);
        a.profile_first = std::stoi(v.substr(0, colon));
        a.profile_last = std::stoi(v.substr(colon + 1));
      } catch (const std::exception&) {
        a.profile_first = 0;
      }
      if (a.profile_first < 1 || a.profile_last < a.profile_first)
        throw lmtrain::InvalidArgument(
            fmt::format("--profile-steps {}: expected A:B, steps 1 ≤ A ≤ B", v));
    } else if (arg == "--normal-matrix") {
      const std::string v = value();
      const auto m = lmtrain::parse_normal_matrix_method(v);
      if (!m)
        throw lmtrain::InvalidArgument(
            fmt::format("--normal-matrix {}: expected auto, syrk or split_k", v));
      a.normal_matrix = *m;
    } else if (arg == "--geodesic")
      a.geodesic = true;
    else if (arg == "--no-geodesic")
      a.geodesic = false;
    else if (arg == "--geodesic-backoff-max")
      a.geodesic_backoff_max = std::stoi(value());
    else if (arg == "--cg-forcing")
      a.cg_forcing = std::stod(value());
    else if (arg == "--cg-max-iterations")
      a.cg_max_iterations = std::stoul(value());
    else if (arg == "--max-slice-samples")
      a.max_slice_samples = std::stoul(value());
    else if (arg == "--train-rows")
      a.train_rows = std::stoul(value());
    else if (arg == "--test-rows")
      a.test_rows = std::stoul(value());
    else if (arg == "--data")
      a.data = value();
    else if (arg == "--loss")
      a.loss = value();
    else
      usage_error(fmt::format("unknown argument '{}'", arg));
  }
  try {
    (void)lmtrain::parse_device(a.device);
  } catch (const lmtrain::InvalidArgument& e) {
    usage_error(fmt::format("--device: {}", e.what()));
  }
  return a;
}

using bench::peak_rss_bytes;

using bench::median;

// JSON number: NaN and ±∞ are not JSON, so they become null.
std::string num(double x) {
  return std::isfinite(x) ? fmt::format("{:.9g}", x) : "null";
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The library's device rule (backend/device.h); ranks of an mpirun launch spread over the GPUs
// by the node-local rank the launcher exports.
template <typename T>
std::unique_ptr<lmtrain::Backend<T>> make_backend(const std::string& device) {
  const int local_rank = lmtrain::dist::local_rank_from_environment().value_or(0);
  return lmtrain::make_backend<T>(lmtrain::choose_device(device, local_rank));
}

// Seconds per phase, each divided by `divisor` (the step count gives the mean per step).
std::string phases_json(const lmtrain::PhaseTimes& t, double divisor = 1.0) {
  std::string s = "{";
  for (std::size_t p = 0; p < static_cast<std::size_t>(lmtrain::Phase::kCount); ++p) {
    const auto phase = static_cast<lmtrain::Phase>(p);
    if (p) s += ",";
    s += fmt::format("{}:{}", json_string(lmtrain::phase_name(phase)), num(t[phase] / divisor));
  }
  return s + "}";
}

// Per LM step: each phase's median over `steps` (IterationSummary::step_times) — the run's first
// step and the first of each epoch hold one-off work (the normal matrix's choice of method, lazy
// loading) that a mean would spread over the others — except the phases outside a step (the
// epoch's evaluation, the records), which are the run's totals over `count` steps.  With no steps
// to take medians over, totals / count throughout.
lmtrain::PhaseTimes median_phases(const std::vector<lmtrain::PhaseTimes>& steps,
                                  const lmtrain::PhaseTimes& totals, int count) {
  lmtrain::PhaseTimes out;
  for (std::size_t p = 0; p < static_cast<std::size_t>(lmtrain::Phase::kCount); ++p) {
    const auto phase = static_cast<lmtrain::Phase>(p);
    const bool outside = phase == lmtrain::Phase::kValidation || phase == lmtrain::Phase::kRecords;
    if (steps.empty() || outside) {
      out[phase] = totals[phase] / count;
      continue;
    }
    std::vector<double> v;
    v.reserve(steps.size());
    for (const auto& t : steps) v.push_back(t[phase]);
    out[phase] = median(v);
  }
  return out;
}

const char* device_kind_name(lmtrain::DeviceKind kind) {
  return kind == lmtrain::DeviceKind::kCuda ? "cuda" : "cpu";
}

// ---- device roofline ---------------------------------------------------------------------------

// What the device reaches at best on the two operations the LM step's big phases resemble:
//   copy  — Jacobian assembly writes J (rows × n) once and reads far less, so a device-to-device
//           copy (read + write, 2 × size bytes) is its bandwidth ceiling;
//   GEMM  — SYRK is half a GEMM (only one triangle), so square GEMM in the same precision is its
//           rate ceiling (2n³ flops).
struct DeviceRoofline {
  std::size_t copy_bytes = 0;  // size of the copied buffer (each copy moves twice that)
  double copy_seconds = std::nan("");
  double copy_gbps = std::nan("");  // 2 · copy_bytes / median seconds, in 1e9 bytes/s
  std::size_t gemm_n = 0;
  double gemm_seconds = std::nan("");
  double gemm_gflops = std::nan("");  // 2 n³ / median seconds, in 1e9 flop/s
  int copy_repeats = 0;
  int gemm_repeats = 0;
  // Elements per second of the backend's activation_forward on an L2-sized buffer, for each
  // activation the workload's network uses (the vectorized loops, issue 17).
  std::map<lmtrain::Activation, double> activation_rate;
  std::string error;  // why a figure is missing (an allocation failed, …)

  // The fields of the result line, each with its leading comma.
  std::string json() const {
    std::string s = fmt::format(
        ",\"copy_bytes\":{},\"copy_s\":{},\"copy_gbps\":{},\"copy_repeats\":{},\"gemm_n\":{},"
        "\"gemm_s\":{},\"gemm_gflops\":{},\"gemm_repeats\":{}",
        copy_bytes, num(copy_seconds), num(copy_gbps), copy_repeats, gemm_n, num(gemm_seconds),
        num(gemm_gflops), gemm_repeats);
    if (!activation_rate.empty()) {
      s += ",\"activation_rates\":{";
      bool first = true;
      for (const auto& [f, rate] : activation_rate) {
        s +=
            fmt::format("{}{}:{}", first ? "" : ",", json_string(lmtrain::to_string(f)), num(rate));
        first = false;
      }
      s += "}";
    }
    if (!error.empty()) s += fmt::format(",\"roofline_error\":{}", json_string(error));
    return s;
  }
};

// Median wall time of `repeats` runs of `op` after one untimed run (the first touch of fresh
// pages on the CPU; lazy module loading and cuBLAS heuristics on CUDA).  The queue is drained
// before the clock starts and again before it stops, so an asynchronous device is timed to the
// completion of its work, not to the return of the launch.
template <typename Op>
double median_seconds(lmtrain::DeviceQueue& backend, int repeats, Op&& op) {
  op();
  backend.synchronize();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const Clock::time_point t0 = Clock::now();
    op();
    backend.synchronize();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(seconds);
}

// Uniform values in [−1, 1) from splitmix64: GEMM operands that are neither zeros nor constants
// (a GPU's clocks under load depend on how many bits toggle), produced fast enough for 8192².
template <typename T>
std::vector<T> random_values(std::size_t count, std::uint64_t seed) {
  std::vector<T> v(count);
  std::uint64_t state = seed;
  for (T& x : v) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = static_cast<T>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
  }
  return v;
}

// Copy: 1 GiB on a GPU (far beyond its L2), 256 MiB on the CPU (beyond any last-level cache),
// halved while two buffers would take more than half the free memory.  GEMM: n = 8192 on a GPU
// (1.1 TFLOP, tens of milliseconds: launch and tail effects are negligible), 2048 on the CPU
// (17 GFLOP, 0.1–0.3 s on 2 cores: affordable in every process), halved likewise.  Buffers are
// freed before returning, and the function runs after the workload, so neither the workload's
// memory plan nor its measured peak sees them.
template <typename T>
DeviceRoofline measure_roofline(lmtrain::Backend<T>& backend,
                                const std::set<lmtrain::Activation>& activations) {
  const bool gpu = backend.device_kind() == lmtrain::DeviceKind::kCuda;
  DeviceRoofline r;
  r.copy_repeats = 5;
  r.gemm_repeats = gpu ? 5 : 3;
  try {
    const std::size_t free_bytes = backend.available_memory_bytes();
    std::size_t bytes = gpu ? std::size_t{1} << 30 : std::size_t{256} << 20;
    while (bytes > (std::size_t{16} << 20) && 2 * bytes > free_bytes / 2) bytes /= 2;
    const std::size_t count = bytes / sizeof(T);
    {
      auto src = backend.allocate(count), dst = backend.allocate(count);
      backend.fill(src.data(), count, T(1));
      backend.fill(dst.data(), count, T(0));
      r.copy_bytes = count * sizeof(T);
      r.copy_seconds = median_seconds(backend, r.copy_repeats,
                                      [&] { backend.copy(src.data(), dst.data(), count); });
      r.copy_gbps = 2.0 * static_cast<double>(r.copy_bytes) / r.copy_seconds / 1e9;
      // Inputs spread over [−4, 4], where every branch of the activation loops is taken.  On a
      // CPU 64 Ki elements (256 KiB in float32), which stay in a core's L2 as a batch's
      // activations do; on a GPU 16 Mi elements (64 MiB in float32, beyond an H100's L2), a
      // launch that fills the device — 64 Ki elements there time the launch latency, which made
      // the floor sum too high to judge against (issue 36: 0.88 ms on W2).  64 passes per timing.
      const std::size_t act = std::min<std::size_t>(count, std::size_t{1} << (gpu ? 24 : 16));
      const std::vector<T> z = random_values<T>(act, 0xAC7ull);
      backend.copy_from_host(z.data(), src.data(), act);
      backend.add_scaled(act, src.data(), T(3), src.data(), src.data());  // ×4
      for (const lmtrain::Activation f : activations) {
        const double seconds = median_seconds(backend, r.copy_repeats, [&] {
          for (int pass = 0; pass < 64; ++pass)
            backend.activation_forward(f, act, src.data(), dst.data());
        });
        r.activation_rate[f] = 64.0 * static_cast<double>(act) / seconds;
      }
    }
    std::size_t n = gpu ? 8192 : 2048;
    while (n > 256 && 3 * n * n * sizeof(T) > free_bytes / 2) n /= 2;
    {
      const std::vector<T> host = random_values<T>(n * n, 0x5EEDull);
      auto a = backend.allocate(n * n), b = backend.allocate(n * n), c = backend.allocate(n * n);
      backend.copy_from_host(host.data(), a.data(), n * n);
      backend.copy_from_host(host.data(), b.data(), n * n);
      backend.fill(c.data(), n * n, T(0));
      r.gemm_n = n;
      r.gemm_seconds = median_seconds(backend, r.gemm_repeats, [&] {
        backend.gemm(lmtrain::Trans::kNo, lmtrain::Trans::kNo, n, n, n, T(1), a.data(), n, b.data(),
                     n, T(0), c.data(), n);
      });
      const double nd = static_cast<double>(n);
      r.gemm_gflops = 2.0 * nd * nd * nd / r.gemm_seconds / 1e9;
    }
  } catch (const std::exception& e) {
    // The workload's figures are still worth printing; the missing ones say why.
    r.error = e.what();
  }
  return r;
}

// The linear system's own rates, in its precision S (float64 in mixed precision, where the
// roofline's GEMM is the model's float32): the square GEMM rate (measured here when S is not the
// model's precision) and one Cholesky factorization and solve at the run's n — what the
// factorization phase cannot beat at small n, where potrf runs far below the GEMM rate (issue 36:
// a GPU's at n = 769 is a chain of small launches, and n³/3 at the GEMM rate said microseconds).
struct SystemRoofline {
  std::string precision;  // "float32" or "float64"
  double gemm_gflops = std::nan("");
  std::size_t cholesky_n = 0;
  double cholesky_seconds = std::nan("");  // potrf + potrs of one n × n matrix, the copy left out
  // The same work recorded once and replayed as a graph (DeviceQueue::record, issue 36 item 3):
  // what launching an attempt's solve as one graph would take at this n; or why it could not be
  // recorded (a GPU only: the CPU has nothing to record).
  double cholesky_graph_seconds = std::nan("");
  std::string cholesky_graph_refused;
  std::string error;

  std::string json() const {
    std::string s = fmt::format(
        ",\"system_precision\":{},\"system_gemm_gflops\":{},\"cholesky_n\":{},\"cholesky_s\":{}",
        json_string(precision), num(gemm_gflops), cholesky_n, num(cholesky_seconds));
    if (!std::isnan(cholesky_graph_seconds))
      s += fmt::format(",\"cholesky_graph_s\":{}", num(cholesky_graph_seconds));
    if (!cholesky_graph_refused.empty())
      s += fmt::format(",\"cholesky_graph_refused\":{}", json_string(cholesky_graph_refused));
    if (!error.empty()) s += fmt::format(",\"system_roofline_error\":{}", json_string(error));
    return s;
  }
};

// `gemm_n` > 0: measure S's square GEMM at that size too (else the caller has the rate).  The
// Cholesky: A = (n + 1)·I plus a symmetric matrix of entries in [−1, 1) (diagonally dominant, so
// positive definite), restored from a copy before each factorization, as the linear solver does
// on every attempt; the restoring copy's own median is subtracted.
template <typename S>
SystemRoofline measure_system_roofline(lmtrain::LinearAlgebra<S>& la, std::size_t n,
                                       std::size_t gemm_n) {
  SystemRoofline r;
  r.precision = std::is_same_v<S, float> ? "float32" : "float64";
  if (n == 0) return r;
  try {
    std::vector<S> host = random_values<S>(n * n, 0xC401ull);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < i; ++j) host[i * n + j] = host[j * n + i];
      host[i * n + i] = static_cast<S>(n + 1);
    }
    const std::vector<S> rhs = random_values<S>(n, 0x501Eull);
    auto a = la.allocate(n * n), factor = la.allocate(n * n), b = la.allocate(n);
    lmtrain::DeviceBuffer<double> status(la.memory(), 1);
    la.copy_from_host(host.data(), a.data(), n * n);
    la.copy_from_host(rhs.data(), b.data(), n);
    const double copy = median_seconds(la, 5, [&] { la.copy_upper(n, a.data(), factor.data()); });
    const auto solve = [&] {
      la.copy_upper(n, a.data(), factor.data());
      la.potrf_into(n, factor.data(), status.data());
      la.potrs(n, factor.data(), b.data());
    };
    const double all = median_seconds(la, 5, solve);
    if (la.device_kind() != lmtrain::DeviceKind::kCpu) {
      const std::unique_ptr<lmtrain::QueueRecording> graph =
          la.record(solve, r.cholesky_graph_refused);
      if (graph)
        r.cholesky_graph_seconds =
            std::max(median_seconds(la, 5, [&] { graph->replay(); }) - copy, 0.0);
    }
    double info = 0;
    la.read_scalars(status.data(), &info, 1);
    if (info != 0) throw std::runtime_error(fmt::format("potrf of the test matrix: {}", info));
    r.cholesky_n = n;
    r.cholesky_seconds = std::max(all - copy, 0.0);
    if (gemm_n > 0) {
      const std::vector<S> values = random_values<S>(gemm_n * gemm_n, 0x5EEDull);
      auto x = la.allocate(gemm_n * gemm_n), y = la.allocate(gemm_n * gemm_n),
           z = la.allocate(gemm_n * gemm_n);
      la.copy_from_host(values.data(), x.data(), gemm_n * gemm_n);
      la.copy_from_host(values.data(), y.data(), gemm_n * gemm_n);
      const double seconds = median_seconds(la, 3, [&] {
        la.gemm(lmtrain::Trans::kNo, lmtrain::Trans::kNo, gemm_n, gemm_n, gemm_n, S(1), x.data(),
                gemm_n, y.data(), gemm_n, S(0), z.data(), gemm_n);
      });
      const double nd = static_cast<double>(gemm_n);
      r.gemm_gflops = 2.0 * nd * nd * nd / seconds / 1e9;
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// The system's roofline for a run of `backend`'s precision T whose summary says in which
// precision its system was (Summary::float32_system): T's own backend, or in mixed precision a
// float64 sibling on the same device (its GEMM measured at the roofline's size).
template <typename T>
SystemRoofline system_roofline(lmtrain::Backend<T>& backend, const lmtrain::Summary& summary,
                               const DeviceRoofline& roofline) {
  SystemRoofline r;
  if (std::is_same_v<T, float> && !summary.float32_system) {
    const std::unique_ptr<lmtrain::LinearAlgebra<double>> sibling =
        lmtrain::make_sibling_backend<double>(backend);
    r = measure_system_roofline(*sibling, summary.num_params, roofline.gemm_n);
  } else {
    r = measure_system_roofline(backend, summary.num_params, 0);
    r.gemm_gflops = roofline.gemm_gflops;
  }
  return r;
}

// Jacobian assembly and SYRK against the roofline (issue 4), for `rows` residual rows of n
// parameters linearized in `jacobian_s` (Phase::kJacobian) and folded into A in `syrk_s`
// (Phase::kNormalEquations):
//   Jacobian assembly bandwidth = bytes of J written, rows · n · sizeof(T), / jacobian_s.  The
//     phase also reads the backward seeds and activations; those bytes are not counted, so the
//     figure is a lower bound on what the phase moves.
//   SYRK rate = n(n+1) · rows flops (one triangle of JᵀJ, a multiply and an add per entry and
//     row) / syrk_s.  The phase also holds the GEMV g = Jᵀr (2 · rows · n flops, not counted), so
//     this too is a lower bound on the SYRK's own rate.
// `flops`: the normal-equations products the run did (0: none, e.g. matrix-free CG).
std::string assembly_rates_json(double rows, std::size_t n, std::size_t element_size,
                                double jacobian_s, double flops, double syrk_s,
                                const DeviceRoofline* roofline) {
  const double nd = static_cast<double>(n);
  const double bytes = rows * nd * static_cast<double>(element_size);
  const double gbps = bytes / jacobian_s / 1e9;
  const double gflops = flops > 0 ? flops / syrk_s / 1e9 : std::nan("");
  std::string s = fmt::format(
      ",\"jacobian_rows\":{},\"jacobian_bytes\":{},\"jacobian_gbps\":{},\"syrk_flops\":{},"
      "\"syrk_gflops\":{}",
      num(rows), num(bytes), num(gbps), num(flops), num(gflops));
  if (roofline)
    s += roofline->json() + fmt::format(",\"jacobian_copy_fraction\":{},\"syrk_gemm_fraction\":{}",
                                        num(gbps / roofline->copy_gbps),
                                        num(gflops / roofline->gemm_gflops));
  return s;
}

// ---- phase floors (issue 17) -------------------------------------------------------------------

// One sample's forward pass: multiply-adds of the dense and conv2d layers, and activation outputs
// per activation function (pooling and flatten are left out: they bound nothing here).
struct ForwardCost {
  double macs = 0;
  std::map<lmtrain::Activation, double> activations;
  // Per residual row of a Jacobian slice: the products of its weight blocks (a convolution's
  // δ_r X_sᵀ, out · P · K; a dense block is a plain write) and of the seeds' backward pass through
  // every layer but the first (Wᵀδ: in · out for dense, the same O · P · K for a convolution).
  double jacobian_macs = 0;
};

ForwardCost forward_cost(const lmtrain::ModelSpec& spec) {
  using Kind = lmtrain::LayerSpec::Kind;
  ForwardCost c;
  const std::vector<lmtrain::ImageShape> shapes = spec.output_shapes();
  lmtrain::ImageShape in = spec.input_shape();
  for (std::size_t i = 0; i < spec.layers().size(); ++i) {
    const lmtrain::LayerSpec& layer = spec.layers()[i];
    const auto out = static_cast<double>(shapes[i].size());
    if (layer.kind == Kind::kDense) {
      c.macs += static_cast<double>(in.size()) * out;
      if (i > 0) c.jacobian_macs += static_cast<double>(in.size()) * out;
    }
    if (layer.kind == Kind::kConv2d) {
      const double macs =
          out * static_cast<double>(in.channels * layer.window.kernel_h * layer.window.kernel_w);
      c.macs += macs;
      c.jacobian_macs += i > 0 ? 2 * macs : macs;
    }
    if (layer.kind == Kind::kActivation) c.activations[layer.activation] += out;
    in = shapes[i];
  }
  return c;
}

std::set<lmtrain::Activation> activations_of(const lmtrain::ModelSpec& spec) {
  std::set<lmtrain::Activation> out;
  for (const auto& [f, count] : forward_cost(spec).activations) out.insert(f);
  return out;
}

// The least time each phase of one LM step could take on this device, from the rates measured in
// the same process (the roofline): products at the square-GEMM rate, activations at the measured
// rate of the backend's own activation loop, bytes written at the copy bandwidth.  Per step:
//   forward            2 · MACs · batch / GEMM + activations · batch / activation rate
//   jacobian           the bytes of J's rows (batch · R · n · sizeof(T)) / copy bandwidth, or
//                      where more, 2 · the slice's products (ForwardCost::jacobian_macs) ·
//                      batch · R / GEMM (convolutions)
//   normal equations   n(n+1) · batch · R / GEMM (one triangle of JᵀJ)
//   factorization      attempts per step · n³/3 / GEMM (a Cholesky per attempt)
//   trial evaluation   attempts per step · the forward floor
//   geodesic           attempts per step · (two forward floors + J's bytes read once for
//                      Jᵀr_vv), when the run used it
//   epoch evaluation   the forward floor over the training set, once per epoch, spread over steps
// Each is a lower bound the phase cannot beat, not a prediction: small products run far from the
// GEMM rate.  A step's floor is their sum.
std::string phase_floors_json(const lmtrain::ModelSpec& spec, const lmtrain::Summary& summary,
                              std::size_t train_samples, std::size_t element_size,
                              const DeviceRoofline& roofline, const SystemRoofline& system) {
  if (summary.steps <= 0 || summary.batch_size == 0 || !(roofline.gemm_gflops > 0) ||
      !(roofline.copy_gbps > 0))
    return "";
  const ForwardCost cost = forward_cost(spec);
  const double gemm = roofline.gemm_gflops * 1e9, copy = roofline.copy_gbps * 1e9;
  // A, g and the solve in the system's precision: its GEMM rate where measured.
  const double system_gemm = system.gemm_gflops > 0 ? system.gemm_gflops * 1e9 : gemm;
  auto forward = [&](double samples) {
    double t = 2.0 * cost.macs * samples / gemm;
    for (const auto& [f, count] : cost.activations) {
      const auto rate = roofline.activation_rate.find(f);
      if (rate != roofline.activation_rate.end() && rate->second > 0)
        t += count * samples / rate->second;
    }
    return t;
  };
  const double steps = summary.steps;
  const double batch = static_cast<double>(summary.batch_size);
  const double n = static_cast<double>(summary.num_params);
  const double rows = batch * static_cast<double>(summary.residuals_per_sample);
  const double attempts =
      static_cast<double>(summary.accepted_steps + summary.rejected_steps + summary.invalid_steps) /
      steps;
  const double j_bytes = rows * n * static_cast<double>(element_size);
  lmtrain::PhaseTimes f;
  f[lmtrain::Phase::kForward] = forward(batch);
  f[lmtrain::Phase::kJacobian] = std::max(j_bytes / copy, 2.0 * cost.jacobian_macs * rows / gemm);
  f[lmtrain::Phase::kNormalEquations] = n * (n + 1) * rows / system_gemm;
  // n³/3 at the GEMM rate, or where more, the Cholesky and solve of this n measured alone.
  const double cholesky = system.cholesky_seconds > 0 ? system.cholesky_seconds : 0.0;
  f[lmtrain::Phase::kFactorization] = attempts * std::max(n * n * n / 3.0 / system_gemm, cholesky);
  f[lmtrain::Phase::kTrialEvaluation] = attempts * forward(batch);
  if (summary.times[lmtrain::Phase::kGeodesic] > 0)
    f[lmtrain::Phase::kGeodesic] = attempts * (2.0 * forward(batch) + j_bytes / copy);
  f[lmtrain::Phase::kValidation] =
      forward(static_cast<double>(train_samples)) * summary.epochs / steps;
  return fmt::format(",\"floors_per_step\":{},\"step_floor_s\":{}", phases_json(f), num(f.total()));
}

// The run's Jacobian-assembly and SYRK rates against the roofline, and its phase floors (the
// fields of the result line, each with its leading comma; none without a roofline or rows).
std::string run_rates_json(const lmtrain::ModelSpec& spec, const lmtrain::Summary& summary,
                           std::size_t train_samples, std::size_t element_size,
                           const DeviceRoofline* roofline, const SystemRoofline* system) {
  // Every step linearizes one batch once (a retry never rebuilds J or A), so when the batches
  // split the training set evenly the run assembled steps · batch · R rows of J; otherwise the
  // rows of the short batches are not known here and the rates are left out.
  std::string rates;
  if (summary.batch_size > 0 && train_samples % summary.batch_size == 0 && summary.steps > 0) {
    // The products behind the "normal equations" phase: JᵀJ (n(n+1) flops per row, SYRK); none
    // when J is stored instead (matrix-free CG, and the dual form, whose JJᵀ is part of its
    // factorization phase).
    const double m =
        static_cast<double>(summary.batch_size) * static_cast<double>(summary.residuals_per_sample);
    const double rows = static_cast<double>(summary.steps) * m;
    const double nd = static_cast<double>(summary.num_params);
    const lmtrain::LinearSolverType used = summary.linear_solver_used;
    const bool stored =
        used == lmtrain::LinearSolverType::kCg || used == lmtrain::LinearSolverType::kDual;
    const double flops = stored ? 0.0 : nd * (nd + 1) * rows;
    rates = assembly_rates_json(rows, summary.num_params, element_size,
                                summary.times[lmtrain::Phase::kJacobian], flops,
                                summary.times[lmtrain::Phase::kNormalEquations], roofline);
  } else if (roofline) {
    rates = roofline->json();
  }
  if (roofline && system)
    rates += system->json() +
             phase_floors_json(spec, summary, train_samples, element_size, *roofline, *system);
  return rates;
}

bool wants_roofline(const Args& args) {
  if (args.roofline) return *args.roofline;
  return args.workload == "W1" || args.workload == "W2" || args.workload == "W3" ||
         args.workload == "W4" || args.workload == "W5" || args.workload == "W7";
}

// ---- data ------------------------------------------------------------------------------------

double sinc10(double x) {
  const double t = std::numbers::pi * 10.0 * x;
  return t == 0 ? 1.0 : std::sin(t) / t;
}

template <typename T>
void sinc_data(std::size_t n, lmtrain::Dataset<T>& train, lmtrain::Dataset<T>& test) {
  train = lmtrain::Dataset<T>(n, 1, 1);
  const double h = 2.0 / static_cast<double>(n - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = -1.0 + h * static_cast<double>(i);
    train.x[i] = static_cast<T>(x);
    train.y[i] = static_cast<T>(sinc10(x));
  }
  const std::size_t m = (n - 1 + 3) / 4;  // midpoints i = 0, 4, 8, … < n − 1
  test = lmtrain::Dataset<T>(m, 1, 1);
  for (std::size_t k = 0; k < m; ++k) {
    const double x = -1.0 + h * (static_cast<double>(4 * k) + 0.5);
    test.x[k] = static_cast<T>(x);
    test.y[k] = static_cast<T>(sinc10(x));
  }
}

// W5's data (shared/WORKLOADS.md: x ∈ R⁸ random, y a smooth function of x), the same in
// bench/peers/torch_lm.py: x standard normal by Box–Muller from SplitMix64 (seed 5 for training,
// 6 for the test rows), y = sin x₀ + cos x₁·x₂ + 0.1·x₃² + tanh(x₄ − x₅) + 0.3·x₆x₇ in double,
// both rounded to T once.
template <typename T>
lmtrain::Dataset<T> dense_data(std::size_t rows, std::uint64_t seed) {
  std::uint64_t state = seed;
  auto uniform = [&state] {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  };
  lmtrain::Dataset<T> d(rows, 8, 1);
  std::vector<double> x(8);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t k = 0; k < 8; k += 2) {
      const double u1 = uniform(), u2 = uniform();
      const double radius = std::sqrt(-2.0 * std::log1p(-u1));
      x[k] = radius * std::cos(2.0 * std::numbers::pi * u2);
      x[k + 1] = radius * std::sin(2.0 * std::numbers::pi * u2);
    }
    for (std::size_t k = 0; k < 8; ++k) d.x[r * 8 + k] = static_cast<T>(x[k]);
    d.y[r] = static_cast<T>(std::sin(x[0]) + std::cos(x[1]) * x[2] + 0.1 * x[3] * x[3] +
                            std::tanh(x[4] - x[5]) + 0.3 * x[6] * x[7]);
  }
  return d;
}

// A FANN data file (plain or .gz) through lmtrain's own reader (io/fann_reader.h), as a Dataset.
template <typename T>
lmtrain::Dataset<T> read_fann(const std::string& path) {
  const lmtrain::io::FannTrainData fann = lmtrain::io::read_fann(path);
  lmtrain::Dataset<T> d(fann.inputs.rows, fann.inputs.cols, fann.outputs.cols);
  std::transform(fann.inputs.values.begin(), fann.inputs.values.end(), d.x.begin(),
                 [](double v) { return static_cast<T>(v); });
  std::transform(fann.outputs.values.begin(), fann.outputs.values.end(), d.y.begin(),
                 [](double v) { return static_cast<T>(v); });
  return d;
}

std::string find_fann_file(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name, dir + "/" + name + ".gz"}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  throw lmtrain::InvalidArgument(fmt::format(
      "{}/{}(.gz) not found; install Debian libfann-doc or pass --datasets DIR", dir, name));
}

// One-hot targets with several outputs make a classification set (thyroid).
template <typename T>
bool is_one_hot(const lmtrain::Dataset<T>& d) {
  if (d.outputs < 2) return false;
  for (std::size_t s = 0; s < d.samples; ++s) {
    int ones = 0;
    for (std::size_t o = 0; o < d.outputs; ++o) {
      const T v = d.y[s * d.outputs + o];
      if (v == T(1))
        ++ones;
      else if (v != T(0))
        return false;
    }
    if (ones != 1) return false;
  }
  return true;
}

template <typename T>
double accuracy(const std::vector<T>& pred, const lmtrain::Dataset<T>& d) {
  std::size_t right = 0;
  for (std::size_t s = 0; s < d.samples; ++s) {
    const auto row = [&](const std::vector<T>& v) { return v.begin() + s * d.outputs; };
    const auto p = std::max_element(row(pred), row(pred) + d.outputs) - row(pred);
    const auto t = std::max_element(row(d.y), row(d.y) + d.outputs) - row(d.y);
    right += p == t ? 1 : 0;
  }
  return static_cast<double>(right) / static_cast<double>(d.samples);
}

// Per-column (W4: per-pixel) standardization with the training split's mean and population
// standard deviation, a constant pixel only centred: io::Standardization, what `lmtrain fit` does
// for normalize_inputs = "standardize".
template <typename T>
void standardize(lmtrain::Dataset<T>& train, std::initializer_list<lmtrain::Dataset<T>*> others) {
  const auto s = lmtrain::io::Standardization::fit(std::span<const T>(train.x), train.inputs);
  s.apply(std::span<T>(train.x));
  for (lmtrain::Dataset<T>* d : others) s.apply(std::span<T>(d->x));
}

// ---- W1 / W2 / W6: training through the Trainer ----------------------------------------------

template <typename T>
int train_and_report(const Args& args, const std::string& workload, const std::string& variant,
                     const lmtrain::ModelSpec& spec, const lmtrain::LossOptions& loss,
                     const lmtrain::TrainerOptions& topt, const lmtrain::Dataset<T>& train,
                     const lmtrain::Dataset<T>* validation, const lmtrain::Dataset<T>& test) {
  auto backend = make_backend<T>(args.device);
  lmtrain::SolverOptions solver;  // lmtrain's defaults, then the flags
  const auto regularization = lmtrain::parse_regularization(args.regularization);
  if (!regularization)
    usage_error(fmt::format("--regularization {}: expected none, l2, bayesian or ard",
                            args.regularization));
  solver.regularization = *regularization;
  const auto damping = lmtrain::parse_damping(args.damping);
  if (!damping)
    usage_error(fmt::format("--damping {}: expected multiplicative or nielsen", args.damping));
  solver.damping = *damping;
  solver.geodesic_acceleration = args.geodesic;  // unset: lmtrain's default (auto)
  if (args.geodesic_backoff_max >= 0) solver.geodesic_backoff_max = args.geodesic_backoff_max;
  if (args.mixed) solver.system_precision = lmtrain::SystemPrecision::kFloat64;
  if (args.float32) solver.system_precision = lmtrain::SystemPrecision::kModel;
  const auto linear_solver = lmtrain::parse_linear_solver(args.solver);
  if (!linear_solver)
    usage_error(
        fmt::format("--solver {}: expected auto, cholesky, eigen, cg or dual", args.solver));
  solver.linear_solver = *linear_solver;
  if (args.lambda_initial > 0) solver.lambda_initial = args.lambda_initial;
  if (args.lambda_increase > 0) solver.lambda_increase = args.lambda_increase;
  if (args.lambda_decrease > 0) solver.lambda_decrease = args.lambda_decrease;
  if (args.cg_forcing > 0) solver.cg_forcing = args.cg_forcing;
  if (args.cg_max_iterations > 0) solver.cg_max_iterations = args.cg_max_iterations;
  solver.max_slice_samples = args.max_slice_samples;
  solver.damping_per_sample = args.per_sample_damping;
  solver.tf32 = args.tf32;
  solver.cuda_graphs = args.cuda_graphs;
  solver.normal_matrix = args.normal_matrix;
  solver.validate();
  lmtrain::Trainer<T> trainer(spec, loss, solver, topt, *backend);
  std::vector<T> params =
      lmtrain::Sequential<T>(spec, *backend).initial_parameters(lmtrain::Init::kTorch, args.seed);

  // Per-step wall time: from the end of one step's callback to the next.  The first step of an
  // epoch also contains the previous epoch's training-loss evaluation, so with several batches per
  // epoch only the other steps enter the median (the peer times its training_step the same way).
  std::vector<double> step_seconds, all_step_seconds;
  std::vector<lmtrain::PhaseTimes> step_phases, all_step_phases;  // each step's own phases
  Clock::time_point last = Clock::now();
  std::size_t batches_per_epoch = 1;
  // --profile-steps A:B: collection on from the end of step A − 1 to the end of step B.
  if (args.profile_first == 1) lmtrain::cuda_profiler_collect(true);
  trainer.add_callback([&](const lmtrain::IterationSummary& it) {
    if (it.step + 1 == args.profile_first) lmtrain::cuda_profiler_collect(true);
    if (it.step == args.profile_last) lmtrain::cuda_profiler_collect(false);
    const Clock::time_point now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last).count();
    last = now;
    all_step_seconds.push_back(dt);
    all_step_phases.push_back(it.step_times);
    if (it.batch > 0) {
      step_seconds.push_back(dt);
      step_phases.push_back(it.step_times);
    }
    batches_per_epoch = std::max(batches_per_epoch, it.batch + 1);
    fmt::print(
        "{{\"type\":\"step\",\"tool\":\"lmtrain\",\"workload\":{},\"variant\":{},"
        "\"step\":{},\"epoch\":{},\"batch\":{},\"seconds\":{},\"elapsed\":{},"
        "\"batch_loss\":{},\"lambda\":{},\"attempts\":{},\"gain_ratio\":{}}}\n",
        json_string(workload), json_string(variant), it.step, it.epoch, it.batch, num(dt),
        num(it.elapsed_seconds), num(it.batch_loss), num(it.lambda), it.report.attempts,
        num(it.report.gain_ratio));
    return lmtrain::CallbackResult::kContinue;
  });

  const Clock::time_point start = Clock::now();
  last = start;
  const lmtrain::Summary summary = trainer.fit(params, train, validation);
  const double total = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> epoch_seconds;
  double previous = 0;
  for (const auto& e : summary.history) {
    epoch_seconds.push_back(e.seconds - previous);
    previous = e.seconds;
    fmt::print(
        "{{\"type\":\"epoch\",\"tool\":\"lmtrain\",\"workload\":{},\"variant\":{},"
        "\"epoch\":{},\"train_loss\":{},\"validation_loss\":{},\"elapsed\":{},"
        "\"lambda\":{}}}\n",
        json_string(workload), json_string(variant), e.epoch, num(e.training_loss),
        num(e.validation_loss), num(e.seconds), num(e.lambda));
  }
  // Full batch: every step is the first of its epoch, so its interval also holds the previous
  // epoch's loss evaluation (one forward pass, small next to the step); the run's first interval
  // also holds the initial evaluation and is left out.
  double step_median = median(step_seconds);
  std::string step_basis = "median of steps 2.. of each epoch";
  if (step_seconds.empty() && !all_step_seconds.empty()) {
    step_median =
        median(all_step_seconds.size() > 1
                   ? std::vector<double>(all_step_seconds.begin() + 1, all_step_seconds.end())
                   : all_step_seconds);
    step_basis = "median of step intervals (full batch: with the epoch's loss evaluation)";
    step_phases.assign(all_step_phases.begin() + (all_step_phases.size() > 1 ? 1 : 0),
                       all_step_phases.end());
  }
  const lmtrain::PhaseTimes per_step =
      median_phases(step_phases, summary.times, std::max(1, summary.steps));

  const double test_loss = trainer.evaluate(params, test);
  std::string extra;
  if (is_one_hot(test)) {
    const std::vector<T> pred = trainer.predict(params, test.x);
    const std::vector<T> pred_train = trainer.predict(params, train.x);
    extra = fmt::format(",\"test_accuracy\":{},\"train_accuracy\":{}", num(accuracy(pred, test)),
                        num(accuracy(pred_train, train)));
  }
  // Before the roofline, whose buffers (512 MiB on the CPU) would otherwise set the peak RSS.
  const long long rss = peak_rss_bytes();
  // After everything timed, and after fit freed its buffers (see measure_roofline).
  std::optional<DeviceRoofline> roofline;
  std::optional<SystemRoofline> system;
  if (wants_roofline(args)) {
    roofline = measure_roofline(*backend, activations_of(spec));
    system = system_roofline(*backend, summary, *roofline);
  }
  const std::string rates =
      run_rates_json(spec, summary, train.samples, sizeof(T), roofline ? &*roofline : nullptr,
                     system ? &*system : nullptr);
  fmt::print(
      "{{\"type\":\"result\",\"tool\":\"lmtrain\",\"workload\":{},\"variant\":{},\"device\":{},"
      "\"precision\":{},\"model\":{},\"loss\":{},\"params\":{},\"train_samples\":{},"
      "\"test_samples\":{},\"batch\":{},\"epochs\":{},\"steps\":{},"
      "\"median_step_s\":{},\"step_basis\":{},\"median_epoch_s\":{},\"total_s\":{},"
      "\"initial_train_loss\":{},\"final_train_loss\":{},\"test_loss\":{}{},"
      "\"peak_rss_bytes\":{},\"termination\":{},\"solver\":{},\"slice_samples\":{},"
      "\"accepted\":{},\"rejected\":{},\"invalid\":{},\"final_lambda\":{},\"phases\":{},"
      "\"phases_per_step\":{},\"phases_per_step_basis\":{},\"device_kind\":{},"
      "\"peak_device_bytes\":{},\"planned_peak_bytes\":{},\"host_reads_per_step\":{},"
      "\"normal_matrix\":{}{}}}\n",
      json_string(workload), json_string(variant), json_string(summary.device),
      json_string(summary.precision), json_string(summary.model),
      json_string(lmtrain::to_string(loss.kind)), summary.num_params, train.samples, test.samples,
      summary.batch_size, summary.epochs, summary.steps, num(step_median), json_string(step_basis),
      num(median(epoch_seconds)), num(total), num(summary.initial_loss), num(summary.final_loss),
      num(test_loss), extra, rss, json_string(lmtrain::to_string(summary.termination)),
      json_string(lmtrain::to_string(summary.linear_solver_used)), summary.slice_samples,
      summary.accepted_steps, summary.rejected_steps, summary.invalid_steps,
      num(summary.final_lambda), phases_json(summary.times), phases_json(per_step),
      json_string(step_phases.empty() ? "mean: phase totals / steps"
                                      : "median of each phase over the steps of median_step_s; "
                                        "epoch evaluation and records: totals / steps"),
      json_string(device_kind_name(backend->device_kind())), summary.peak_device_bytes,
      summary.planned_peak_bytes, num(summary.host_reads_per_step()),
      json_string(summary.normal_matrix), rates);
  // The human-readable report goes to stderr, so stdout stays JSON.
  fmt::print(stderr, "{}", summary.full_report());
  return summary.termination == lmtrain::TerminationReason::kNonFiniteObjective ? 1 : 0;
}

// W1 (20 000 points, 1-20-1, batch 1 000), W2 (100 000 points, 1-256-1, batch 10 000) and W7
// (W2's data and network, full batch: cuPyLMA's examples/curve_fitting).
template <typename T>
int run_sinc(const Args& args) {
  const bool w1 = args.workload == "W1", w7 = args.workload == "W7";
  const std::size_t n = w1 ? 20000 : 100000;
  lmtrain::Dataset<T> train, test;
  sinc_data(n, train, test);
  lmtrain::TrainerOptions topt;
  topt.max_epochs = args.epochs > 0 ? args.epochs : (w1 ? 50 : w7 ? 200 : 10);
  topt.batch_size = w1 ? 1000 : w7 ? n : 10000;
  topt.seed = args.seed;
  const auto spec = lmtrain::ModelSpec::mlp(1, {w1 ? std::size_t{20} : std::size_t{256}}, 1,
                                            lmtrain::Activation::kTanh);
  return train_and_report<T>(args, args.workload,
                             w1   ? "sinc-61"
                             : w7 ? "sinc-769-full"
                                  : "sinc-769",
                             spec, lmtrain::LossOptions{}, topt, train, nullptr, test);
}

// W5 (dense-large): the normal equations at scale, one full-batch step per epoch.
template <typename T>
int run_dense(const Args& args) {
  const lmtrain::Dataset<T> train = dense_data<T>(args.rows, 5);
  const lmtrain::Dataset<T> test = dense_data<T>(std::max<std::size_t>(args.rows / 10, 1), 6);
  lmtrain::TrainerOptions topt;
  topt.max_epochs = args.epochs > 0 ? args.epochs : 4;
  topt.batch_size = 0;  // full batch
  topt.seed = args.seed;
  const std::size_t width = args.width_given ? args.width : 100;
  const auto spec = lmtrain::ModelSpec::mlp(8, {width, width}, 1, lmtrain::Activation::kTanh);
  return train_and_report<T>(args, "W5", fmt::format("dense-{}", spec.num_params()), spec,
                             lmtrain::LossOptions{}, topt, train, nullptr, test);
}

template <typename T>
int run_fann(const Args& args) {
  if (args.set.empty()) usage_error("W6 needs --set NAME (e.g. kin32fm)");
  lmtrain::Dataset<T> train = read_fann<T>(find_fann_file(args.datasets, args.set + ".train"));
  lmtrain::Dataset<T> test = read_fann<T>(find_fann_file(args.datasets, args.set + ".test"));
  // Optional validation split: the last fraction of the training file (the files are already in
  // random order), for MATLAB trainlm-style early stopping (max_fail = 6, best model restored).
  lmtrain::Dataset<T> validation;
  const bool with_validation = args.validation_fraction > 0;
  if (with_validation) {
    const auto nv =
        static_cast<std::size_t>(args.validation_fraction * static_cast<double>(train.samples));
    const std::size_t nt = train.samples - nv;
    validation = lmtrain::Dataset<T>(nv, train.inputs, train.outputs);
    std::copy(train.x.begin() + nt * train.inputs, train.x.end(), validation.x.begin());
    std::copy(train.y.begin() + nt * train.outputs, train.y.end(), validation.y.begin());
    train.samples = nt;
    train.x.resize(nt * train.inputs);
    train.y.resize(nt * train.outputs);
  }
  if (args.standardize_inputs) {
    if (with_validation)
      standardize(train, {&validation, &test});
    else
      standardize(train, {&test});
  }
  lmtrain::TrainerOptions topt;
  topt.max_epochs = args.epochs > 0 ? args.epochs : 1000000;
  topt.batch_size = 0;  // full batch
  topt.seed = args.seed;
  topt.max_time_seconds = args.budget;
  const auto spec = lmtrain::ModelSpec::mlp(train.inputs, {args.hidden}, train.outputs,
                                            lmtrain::Activation::kTanh);
  return train_and_report<T>(args, "W6", args.set, spec, lmtrain::LossOptions{}, topt, train,
                             with_validation ? &validation : nullptr, test);
}

// ---- W4: cuPyLMA's SimpleCNN on a Fashion-MNIST subset ----------------------------------------

// The first `rows` records of an IDX file (gzip or plain), parsed by lmtrain's reader
// (io/idx_reader.h).  Only the header and those records are decompressed: all 60 000 training
// images as doubles (376 MB) would otherwise set the run's peak RSS, not the training.
lmtrain::io::NumericTable read_idx_rows(const std::string& path, std::size_t rows) {
  struct GzCloser {
    void operator()(gzFile_s* f) const { gzclose(f); }
  };
  const std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  if (!gz)
    throw lmtrain::InvalidArgument(fmt::format(
        "cannot open {}; install Debian dataset-fashion-mnist or pass --data DIR", path));
  std::string bytes;
  auto read = [&](std::size_t n) {
    const std::size_t old = bytes.size();
    bytes.resize(old + n);
    const int got = gzread(gz.get(), bytes.data() + old, static_cast<unsigned>(n));
    if (got < 0 || static_cast<std::size_t>(got) != n)
      throw lmtrain::InvalidArgument(
          fmt::format("{}: shorter than its IDX header says (or not gzip/IDX)", path));
  };
  read(4);
  const auto type = static_cast<unsigned char>(bytes[2]);
  const auto ndim = static_cast<unsigned char>(bytes[3]);
  const std::size_t element = type == 0x08 || type == 0x09   ? 1
                              : type == 0x0B                 ? 2
                              : type == 0x0C || type == 0x0D ? 4
                              : type == 0x0E                 ? 8
                                                             : 0;
  if (element == 0 || ndim == 0) return lmtrain::io::read_idx(path);  // its error message
  read(4 * std::size_t{ndim});
  auto dim = [&](std::size_t i) {
    std::uint32_t v = 0;
    for (std::size_t b = 0; b < 4; ++b)
      v = (v << 8) | static_cast<unsigned char>(bytes[4 + 4 * i + b]);
    return std::size_t{v};
  };
  std::size_t record = element;
  for (std::size_t i = 1; i < ndim; ++i) record *= dim(i);
  const std::size_t n = rows > 0 ? std::min(rows, dim(0)) : dim(0);
  for (std::size_t b = 0; b < 4; ++b)  // the first dimension becomes n (big-endian)
    bytes[4 + b] = static_cast<char>((n >> (8 * (3 - b))) & 0xFF);
  read(n * record);
  return lmtrain::io::parse_idx(bytes, path);
}

// The first `rows` images (n × 784 pixels) and their labels as one-hot rows of 10, in raw units.
template <typename T>
lmtrain::Dataset<T> read_fashion(const std::string& dir, const std::string& prefix,
                                 std::size_t rows) {
  const lmtrain::io::NumericTable images =
      read_idx_rows(fmt::format("{}/{}-images-idx3-ubyte.gz", dir, prefix), rows);
  const lmtrain::io::NumericTable labels =
      read_idx_rows(fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, prefix), rows);
  if (images.cols != 28 * 28 || labels.rows != images.rows)
    throw lmtrain::InvalidArgument(fmt::format(
        "{}: expected 28×28 images with one label each, got {} pixels per row and {} labels for "
        "{} images",
        images.source, images.cols, labels.rows, images.rows));
  const std::size_t n = images.rows;
  lmtrain::Dataset<T> d(n, images.cols, 10);
  std::transform(images.values.begin(), images.values.end(), d.x.begin(),
                 [](double v) { return static_cast<T>(v); });
  for (std::size_t s = 0; s < n; ++s) {
    const double label = labels.values[s];
    if (!(label >= 0 && label < 10))
      throw lmtrain::InvalidArgument(
          fmt::format("{}: label {} of row {} is not a class 0–9", labels.source, label, s));
    d.y[s * 10 + static_cast<std::size_t>(label)] = T(1);
  }
  return d;
}

template <typename T>
int run_fashion(const Args& args) {
  lmtrain::Dataset<T> train = read_fashion<T>(args.data, "train", args.train_rows);
  lmtrain::Dataset<T> test = read_fashion<T>(args.data, "t10k", args.test_rows);
  standardize(train, {&test});
  lmtrain::LossOptions loss;
  const std::optional<lmtrain::LossKind> kind = lmtrain::parse_loss(args.loss);
  if (!kind || !lmtrain::is_softmax_loss(*kind))
    usage_error(
        fmt::format("W4: --loss must be cross_entropy_sqrt (the peers' √CE residual), "
                    "cross_entropy (exact Gauss–Newton) or cross_entropy_sampled, not '{}'",
                    args.loss));
  loss.kind = *kind;
  lmtrain::TrainerOptions topt;
  topt.max_epochs = args.epochs > 0 ? args.epochs : 5;
  topt.batch_size = 2000;
  topt.seed = args.seed;
  // examples/fashion-cnn/run.toml: Conv(1→8,k4,s2)-ELU-Conv(8→4,k4,s2)-ELU-[Conv(4→4,k2)-ELU]×3-
  // Flatten-Dense(16→10), PyTorch's default initialization.
  lmtrain::ModelSpec spec(lmtrain::ImageShape{1, 28, 28});
  spec.conv2d(8, 4, 2).activation(lmtrain::Activation::kElu);
  spec.conv2d(4, 4, 2).activation(lmtrain::Activation::kElu);
  for (int i = 0; i < 3; ++i) spec.conv2d(4, 2).activation(lmtrain::Activation::kElu);
  spec.flatten().dense(10);
  return train_and_report<T>(args, "W4", fmt::format("fashion-{}", train.samples), spec, loss, topt,
                             train, nullptr, test);
}

// ---- W3: Jacobian + JᵀJ only -------------------------------------------------------------------

template <typename T>
int run_jacobian(const Args& args) {
  auto backend = make_backend<T>(args.device);
  const std::vector<std::size_t> hidden(args.depth, args.width);
  const auto spec = lmtrain::ModelSpec::mlp(1, hidden, 1, lmtrain::Activation::kTanh);
  const lmtrain::Sequential<T> model(spec, *backend);
  const lmtrain::Loss<T> loss(lmtrain::LossOptions{}, 1, *backend);
  lmtrain::JacobianEngine<T> engine(model, loss);
  const std::size_t n = model.num_params(), s = args.samples;

  // The same plan the Trainer makes for a Cholesky step (half the available memory).
  lmtrain::EngineSource<T> source(engine);
  lmtrain::StepProblem problem;
  problem.batch = problem.local_batch = s;
  problem.budget_bytes = backend->available_memory_bytes() / 2;
  lmtrain::SolverOptions cholesky;
  cholesky.linear_solver = lmtrain::LinearSolverType::kCholesky;
  const lmtrain::MemoryPlan plan =
      lmtrain::plan_step_memory(cholesky, lmtrain::LinearSolverType::kCholesky, source, problem);
  lmtrain::NormalEquationsBuilder<T> builder(source, plan.slice_samples, s, false);

  std::vector<T> x(s), y(s);
  for (std::size_t i = 0; i < s; ++i) {
    const double xi =
        s == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(s - 1);
    x[i] = static_cast<T>(xi);
    y[i] = static_cast<T>(sinc10(xi));
  }
  auto xd = backend->allocate(s), yd = backend->allocate(s), pd = backend->allocate(n);
  backend->copy_from_host(x.data(), xd.data(), s);
  backend->copy_from_host(y.data(), yd.data(), s);
  const std::vector<T> params = model.initial_parameters(lmtrain::Init::kTorch, args.seed);
  backend->copy_from_host(params.data(), pd.data(), n);

  lmtrain::NormalEquations<T> ne;
  std::vector<double> seconds, jac_seconds, assembly_seconds, syrk_seconds;
  lmtrain::PhaseTimes total;
  // Everything the build needs beyond this point (A, g and the engine's batch buffers, allocated
  // by the warm-up) enters the peak; what is held now (model, data, slice) is its floor.
  backend->memory().reset_peak();
  for (int r = 0; r <= args.repeats; ++r) {  // r = 0 is the warm-up
    lmtrain::PhaseTimes times;
    const Clock::time_point t0 = Clock::now();
    builder.build(pd.data(), xd.data(), yd.data(), s, ne, times);
    backend->synchronize();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r == 0) continue;
    seconds.push_back(dt);
    jac_seconds.push_back(times[lmtrain::Phase::kForward] + times[lmtrain::Phase::kJacobian]);
    assembly_seconds.push_back(times[lmtrain::Phase::kJacobian]);
    syrk_seconds.push_back(times[lmtrain::Phase::kNormalEquations]);
    for (std::size_t p = 0; p < total.seconds.size(); ++p) total.seconds[p] += times.seconds[p];
  }
  const std::size_t peak_device_bytes = backend->memory().peak_bytes_in_use();

  // Against the device roofline (issue 4): the Jacobian phase alone (backward seeds and slice
  // assembly; the forward pass is its own phase) and the normal-equations phase of one build
  // (medians over the repeats); see assembly_rates_json for what is and is not counted.
  const double assembly_s = median(assembly_seconds), syrk_s = median(syrk_seconds);
  const double rows = static_cast<double>(s * engine.residuals_per_sample());
  const double nd = static_cast<double>(n);
  const long long rss = peak_rss_bytes();  // before the roofline's buffers
  std::optional<DeviceRoofline> roofline;
  if (wants_roofline(args)) roofline = measure_roofline(*backend, activations_of(spec));
  const std::string rates =
      assembly_rates_json(rows, n, sizeof(T), assembly_s, nd * (nd + 1) * rows, syrk_s,
                          roofline ? &*roofline : nullptr);
  fmt::print(
      "{{\"type\":\"result\",\"tool\":\"lmtrain\",\"workload\":\"W3\",\"variant\":{},"
      "\"device\":{},\"device_kind\":{},\"precision\":{},\"width\":{},\"depth\":{},"
      "\"samples\":{},\"params\":{},\"slice_samples\":{},"
      "\"median_s\":{},\"median_jacobian_s\":{},\"median_jtj_s\":{},\"peak_rss_bytes\":{},"
      "\"planned_peak_bytes\":{},\"peak_device_bytes\":{},\"repeats\":{},\"phases\":{},"
      "\"median_jacobian_assembly_s\":{},\"normal_matrix\":{}{}}}\n",
      json_string(fmt::format("w{}-d{}-s{}", args.width, args.depth, s)),
      json_string(backend->name()), json_string(device_kind_name(backend->device_kind())),
      json_string(sizeof(T) == 4 ? "float32" : "float64"), args.width, args.depth, s, n,
      plan.slice_samples, num(median(seconds)), num(median(jac_seconds)), num(syrk_s), rss,
      plan.peak_bytes, peak_device_bytes, args.repeats, phases_json(total), num(assembly_s),
      json_string(backend->normal_matrix_report()), rates);
  return 0;
}

template <typename T>
int run(const Args& args) {
  if (args.workload == "W1" || args.workload == "W2" || args.workload == "W7")
    return run_sinc<T>(args);
  if (args.workload == "W3") return run_jacobian<T>(args);
  if (args.workload == "W4") return run_fashion<T>(args);
  if (args.workload == "W6") return run_fann<T>(args);
  if (args.workload == "W5") return run_dense<T>(args);
  usage_error(fmt::format("unknown workload '{}'", args.workload));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    return args.use_double ? run<double>(args) : run<float>(args);
  } catch (const std::exception& e) {
    fmt::print("{{\"type\":\"error\",\"tool\":\"lmtrain\",\"error\":{}}}\n", json_string(e.what()));
    fmt::print(stderr, "lmtrain_workloads: error: {}\n", e.what());
    return 2;
  }
}
