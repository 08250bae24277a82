// One LM step through every device × precision the library builds — {cpu, cuda} × {float32,
// mixed, float64} — against a reference computed here in double on the host: J by central
// differences of an independent forward pass, δ = (JᵀJ + λI)⁻¹Jᵀr by LAPACK (dposv), and, with
// geodesic acceleration, r_vv by the same central-difference formula along v = −δ and its
// correction a' = (JᵀJ + λI)⁻¹Jᵀr_vv, applied when 2‖a'‖ ≤ α‖δ‖ (and, with a tiny α, refused:
// the plain step).  CUDA cases skip, saying so,
// without a device.  A source's residual blocks: the report's block losses against the block
// sums of the same host reference's residuals at the step's starting point.
#include "lmtrain/solve/lm_step.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <lapacke.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "lmtrain/backend/cuda_backend.h"
#include "support/block_source.h"
#include "support/recording_backend.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

enum class Precision { kFloat32, kMixed, kFloat64 };

struct Case {
  const char* device;
  Precision precision;
  bool geodesic;
};

std::string name(const Case& c) {
  const char* p = c.precision == Precision::kFloat32 ? "float32"
                  : c.precision == Precision::kMixed ? "mixed"
                                                     : "float64";
  return std::string(c.device) + "_" + p + (c.geodesic ? "_geodesic" : "");
}

constexpr std::size_t kBatch = 48, kIn = 2, kHidden = 7;
// Large enough that the geodesic correction passes its ratio test (at λ ≤ 1 it is refused here).
constexpr double kLambda = 3.0;

// The network 2-7-1 tanh in double: out = W2·tanh(W1 x + b1) + b2, PyTorch's parameter order.
std::vector<double> residuals(const std::vector<double>& theta, const std::vector<double>& x,
                              const std::vector<double>& y) {
  std::vector<double> r(kBatch);
  const double* w1 = theta.data();
  const double* b1 = w1 + kHidden * kIn;
  const double* w2 = b1 + kHidden;
  const double b2 = w2[kHidden];
  for (std::size_t b = 0; b < kBatch; ++b) {
    double out = b2;
    for (std::size_t h = 0; h < kHidden; ++h) {
      double z = b1[h];
      for (std::size_t i = 0; i < kIn; ++i) z += w1[h * kIn + i] * x[b * kIn + i];
      out += w2[h] * std::tanh(z);
    }
    r[b] = out - y[b];
  }
  return r;
}

// (JᵀJ + λI)⁻¹ Jᵀu in double (LAPACK dposv on the upper triangle).
std::vector<double> damped_solve(const std::vector<double>& j, const std::vector<double>& u,
                                 std::size_t n, double lambda = kLambda) {
  std::vector<double> a(n * n, 0.0), rhs(n, 0.0);
  for (std::size_t r = 0; r < kBatch; ++r)
    for (std::size_t p = 0; p < n; ++p) {
      rhs[p] += j[r * n + p] * u[r];
      for (std::size_t q = p; q < n; ++q) a[p * n + q] += j[r * n + p] * j[r * n + q];
    }
  for (std::size_t p = 0; p < n; ++p) a[p * n + p] += lambda;
  EXPECT_EQ(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', static_cast<int>(n), 1, a.data(),
                          static_cast<int>(n), rhs.data(), 1),
            0);
  return rhs;
}

// θ after one step by the reference: θ − δ (+ the geodesic correction when it passes the test).
std::vector<double> reference_step(const std::vector<double>& theta, const std::vector<double>& x,
                                   const std::vector<double>& y, bool geodesic,
                                   const SolverOptions& o, double lambda = kLambda) {
  const std::size_t n = theta.size();
  auto f = [&](const std::vector<double>& t) { return residuals(t, x, y); };
  const std::vector<double> j = central_differences(f, theta, 1e-6);
  const std::vector<double> r = f(theta);
  std::vector<double> delta = damped_solve(j, r, n, lambda);
  if (geodesic) {
    const double h = o.geodesic_step;
    std::vector<double> plus(theta), minus(theta);
    for (std::size_t k = 0; k < n; ++k) {
      plus[k] -= h * delta[k];  // θ + h·v, v = −δ
      minus[k] += h * delta[k];
    }
    const auto rp = f(plus), rm = f(minus);
    std::vector<double> rvv(kBatch);
    for (std::size_t b = 0; b < kBatch; ++b) rvv[b] = (rp[b] - 2 * r[b] + rm[b]) / (h * h);
    const std::vector<double> a = damped_solve(j, rvv, n, lambda);
    double an = 0, vn = 0;
    for (std::size_t k = 0; k < n; ++k) {
      an += a[k] * a[k];
      vn += delta[k] * delta[k];
    }
    if (2 * std::sqrt(an) <= o.geodesic_ratio * std::sqrt(vn))
      for (std::size_t k = 0; k < n; ++k) delta[k] += 0.5 * a[k];
  }
  std::vector<double> next(theta);
  for (std::size_t k = 0; k < n; ++k) next[k] -= delta[k];
  return next;
}

// "cuda", "cpu", or "recording": the CPU with a queue that records as a CUDA stream capture
// (support/recording_backend.h), where SolverOptions::cuda_graphs replays its attempts.
template <typename T>
std::unique_ptr<Backend<T>> backend_on(const char* device) {
  if (std::string(device) == "cuda") return make_cuda_backend<T>(0);
  if (std::string(device) == "recording") return std::make_unique<RecordingCpuBackend<T>>();
  return make_cpu_backend<T>();
}

// The library's θ after one step at λ, in precision T (system precision from `o`).
template <typename T>
std::vector<double> library_step(const char* device, const std::vector<double>& theta,
                                 const std::vector<double>& x, const std::vector<double>& y,
                                 const SolverOptions& o, StepReport* report) {
  Problem<T> p(backend_on<T>(device), ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh),
               LossOptions{}, x, y, kBatch);
  p.set_params(theta);
  auto step = make_lm_step<T>(o, LinearSolverType::kCholesky, *p.source, 16, kBatch);
  PhaseTimes times;
  *report = step->step(p.params.data(), p.x.data(), p.y.data(), kBatch, times);
  return p.download(p.params.data(), theta.size());
}

// `steps` LM steps from θ: the parameters after each, the step's normal-matrix report, the
// attempts of all of them and the geodesic corrections computed.  Slices of `slice` samples;
// `halves`: mini-batches, step s on the half s % 2 of the data.  `between(backend, s)` runs after
// step s.
struct Steps {
  std::vector<std::vector<double>> after;
  std::string report;
  int attempts = 0;
  int corrections = 0;
  std::vector<int> step_attempts;
};
template <typename T>
Steps library_steps(std::unique_ptr<Backend<T>> backend, const std::vector<double>& theta,
                    const std::vector<double>& x, const std::vector<double>& y,
                    const SolverOptions& o, int steps,
                    const std::function<void(Backend<T>&, int)>& between = {},
                    std::size_t slice = 16, bool halves = false) {
  Problem<T> p(std::move(backend), ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh),
               LossOptions{}, x, y, kBatch);
  p.set_params(theta);
  auto step = make_lm_step<T>(o, LinearSolverType::kCholesky, *p.source, slice, kBatch);
  Steps out;
  for (int s = 0; s < steps; ++s) {
    PhaseTimes times;
    const std::size_t batch = halves ? kBatch / 2 : kBatch;
    const std::size_t first = halves ? (s % 2) * batch : 0;
    const StepReport r =
        step->step(p.params.data(), p.x.data() + first * kIn, p.y.data() + first, batch, times);
    out.attempts += r.attempts;
    out.step_attempts.push_back(r.attempts);
    out.corrections += r.geodesic_applied + r.geodesic_refused;
    out.after.push_back(p.download(p.params.data(), theta.size()));
    if (between) between(*p.backend, s);
  }
  out.report = step->normal_matrix_report();
  return out;
}

// A Case on the CPU and, when one is visible, on a CUDA device.
class OnDevice : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (std::string(GetParam().device) == "cuda" && cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device visible";
  }
};

class LmStepOn : public OnDevice {};

// The data and starting point of the cuda_graphs tests: from λ = 1e-6 attempts are rejected and
// λ moves, so a recording is replayed at several λ, within a step and across steps.
struct GraphsCase {
  std::vector<double> x, y, theta;
  SolverOptions options;
  GraphsCase() {
    Rng rng(23);
    x = random_vector(kBatch * kIn, rng);
    y.resize(kBatch);
    for (std::size_t b = 0; b < kBatch; ++b) y[b] = std::tanh(3 * x[b * kIn] - x[b * kIn + 1]);
    theta = random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6);
    options.lambda_initial = 1e-6;
  }
  // The batch in one slice, as a GPU's slices hold W2's: the correction's Jᵀu reads the slice.
  std::size_t slice = kBatch;
  bool halves = false;
  template <typename T>
  Steps run(std::unique_ptr<Backend<T>> backend, bool graphs,
            const std::function<void(Backend<T>&, int)>& between = {}) {
    options.cuda_graphs = graphs;
    return library_steps<T>(std::move(backend), theta, x, y, options, 8, between, slice, halves);
  }
  template <typename T>
  Steps run(const char* device, bool graphs) {
    return run<T>(backend_on<T>(device), graphs);
  }
};

// The parameters after every step equal, bit for bit, and so do the attempts.
void expect_same_steps(const Steps& graphs, const Steps& eager) {
  ASSERT_EQ(graphs.after.size(), eager.after.size());
  for (std::size_t s = 0; s < eager.after.size(); ++s)
    EXPECT_EQ(graphs.after[s], eager.after[s]) << "step " << s;
  EXPECT_EQ(graphs.attempts, eager.attempts);
}

// SolverOptions::cuda_graphs: 8 steps give the parameters of the same steps without it, bit for
// bit, after every step.  The report says the attempts were replayed — every attempt after the
// first from the one recording (a GPU, and the CPU whose queue records as a stream capture:
// there a λ kept from the recording instead of read from the device would change the bits) — or
// why the option was ignored (the CPU, where this checks that asking changes nothing, or a device
// that refused to record the factorization).
TEST_P(LmStepOn, CudaGraphsGiveTheEagerStepsBitForBit) {
  const Case c = GetParam();
  GraphsCase g;
  g.options.geodesic_acceleration = c.geodesic;
  if (c.precision == Precision::kMixed) g.options.system_precision = SystemPrecision::kFloat64;
  const auto run = [&](bool graphs) {
    return c.precision == Precision::kFloat64 ? g.run<double>(c.device, graphs)
                                              : g.run<float>(c.device, graphs);
  };
  const Steps eager = run(false), graphs = run(true);
  expect_same_steps(graphs, eager);
  EXPECT_GT(eager.attempts, 8) << "rejected attempts: the recording replayed at several λ";
  EXPECT_GT(relative_error(eager.after.back(), g.theta), 1e-3) << "steps that move θ";
  EXPECT_EQ(eager.report.find("cuda_graphs"), std::string::npos) << eager.report;
  const std::string& report = graphs.report;
  const std::string device = c.device;
  if (device == "cpu") {
    EXPECT_NE(report.find("SolverOptions::cuda_graphs: ignored, the CPU runs work as it is queued"),
              std::string::npos)
        << report;
  } else if (device == "recording") {
    // Every attempt after the first replayed: the factorization, the trial and, where computed,
    // the correction.  Mixed precision: the float64 system is the double's plain CPU sibling, so
    // only the trial (the model queue's work) is recorded, and the correction says why not.
    const std::string replayed = "replayed from one recording (1 recorded, {} replays)";
    std::vector<std::string> recorded{"the trial "};
    if (c.precision != Precision::kMixed)
      recorded.push_back("each attempt's factorization and solve (n = 29) ");
    for (const std::string& what : recorded)
      EXPECT_NE(report.find(what + fmt::format(fmt::runtime(replayed), graphs.attempts - 1)),
                std::string::npos)
          << what << "\n"
          << report;
    if (c.precision == Precision::kMixed) {
      EXPECT_NE(
          report.find("SolverOptions::cuda_graphs: ignored, the CPU runs work as it is queued"),
          std::string::npos)
          << report;
      if (c.geodesic) {
        EXPECT_NE(report.find("the geodesic correction queued call by call in mixed precision"),
                  std::string::npos)
            << report;
      }
    } else if (c.geodesic) {
      // Also computed at attempts that turn out invalid, which the reports do not count.
      EXPECT_GT(graphs.corrections, 2);
      EXPECT_NE(report.find("the geodesic correction replayed from one recording (1 recorded, "),
                std::string::npos)
          << report;
    }
  } else {
    // Each line: recorded and replayed, or queued call by call with the device's reason.
    // gpu-run.sh copies the [ record ] lines into its summary.
    std::istringstream lines(report);
    int graph_lines = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.find("cuda_graphs") == std::string::npos) continue;
      ++graph_lines;
      std::cout << "[ record ] " << name(c) << ": " << line << "\n";
      EXPECT_TRUE(line.find("replayed from one recording") != std::string::npos ||
                  line.find("SolverOptions::cuda_graphs: ignored, ") != std::string::npos ||
                  line.find("queued call by call") != std::string::npos)
          << line;
    }
    EXPECT_GE(graph_lines, 2) << "the solver's line and the trial's: " << report;
  }
}

// A recording made stale (the CUDA backend's workspace grew and moved) is recorded again before
// its next replay — replaying it would reach freed memory — and the steps stay the eager ones.
TEST(CudaGraphs, AStaleRecordingIsRecordedAgain) {
  GraphsCase g;
  const Steps eager = g.run<double>("recording", false);
  int moved = 0;
  const auto backend = [] { return std::make_unique<RecordingCpuBackend<double>>(); };
  const Steps graphs = g.run<double>(backend(), true, [&](Backend<double>& b, int s) {
    if (s == 2 || s == 5) {
      dynamic_cast<RecordingCpuBackend<double>&>(b).move_workspace();
      ++moved;
    }
  });
  expect_same_steps(graphs, eager);
  ASSERT_EQ(moved, 2);
  EXPECT_NE(graphs.report.find(fmt::format("(3 recorded, {} replays)", graphs.attempts - 1)),
            std::string::npos)
      << graphs.report;
}

// A device that refuses to record the attempt (cuSOLVER's potrf under capture, say): the option
// is ignored from then on with the device's reason, the refused attempt and every later one run
// queued call by call, and the steps are the eager ones.  The same for the trial's and the
// correction's work (a kernel of theirs refused), each on its own.
TEST(CudaGraphs, ARefusedRecordingFallsBackWithTheDevicesReason) {
  const std::string device =
      "cpu, recording as a CUDA stream capture: the work could not be "
      "captured (";
  struct Refusal {
    const char* call;
    std::vector<std::string> lines;
  };
  for (const Refusal& r : {
           Refusal{"potrf_into",
                   {"SolverOptions::cuda_graphs: each attempt's factorization and solve (n = 29) "
                    "queued call by call, " +
                        device + "potrf_into refuses stream capture)",
                    "the trial replayed from one recording", "the geodesic correction replayed"}},
           Refusal{"add_scaled",  // θ − lr·δ, θ ± hv
                   {"each attempt's factorization and solve (n = 29) replayed",
                    "SolverOptions::cuda_graphs: the trial queued call by call, " + device +
                        "add_scaled refuses stream capture)",
                    "SolverOptions::cuda_graphs: the geodesic correction queued call by call, " +
                        device + "add_scaled refuses stream capture)"}},
       }) {
    GraphsCase g;
    g.options.geodesic_acceleration = true;
    const Steps eager = g.run<float>("recording", false);
    auto refusing = std::make_unique<RecordingCpuBackend<float>>();
    refusing->refuse_under_capture(r.call);
    const Steps graphs = g.run<float>(std::move(refusing), true);
    expect_same_steps(graphs, eager);
    for (const std::string& line : r.lines)
      EXPECT_NE(graphs.report.find(line), std::string::npos) << line << "\n" << graphs.report;
  }
}

// Mini-batches: each step's batch is other data (x, y and the residuals' rows change), so the
// trial's and the correction's work is queued call by call at a step's first attempt, recorded
// at its second and replayed at its later ones — never a recording of the other batch.  Slices
// smaller than the batch: the correction's Jᵀu builds J again, work that is not recorded.  Both
// give the eager steps bit for bit.
TEST(CudaGraphs, MiniBatchesAndRebuiltSlicesGiveTheEagerSteps) {
  for (const bool halves : {true, false}) {
    GraphsCase g;
    g.options.geodesic_acceleration = true;
    g.halves = halves;
    g.slice = halves ? kBatch / 2 : 16;
    const Steps eager = g.run<double>("recording", false),
                graphs = g.run<double>("recording", true);
    expect_same_steps(graphs, eager);
    EXPECT_GT(relative_error(eager.after.back(), g.theta), 1e-3);
    const std::string& report = graphs.report;
    if (halves) {
      // Each step's batch is new: a recording at its second attempt, replays from then on.
      int recorded = 0, replays = 0;
      for (const int a : graphs.step_attempts) {
        recorded += a >= 2;
        replays += std::max(a - 1, 0);
      }
      ASSERT_GE(recorded, 1) << "a step with several attempts";
      EXPECT_NE(report.find(fmt::format("the trial replayed from one recording ({} recorded, {} "
                                        "replays)",
                                        recorded, replays)),
                std::string::npos)
          << report;
    } else {
      EXPECT_NE(report.find("the geodesic correction queued call by call: its Jᵀu builds J again"),
                std::string::npos)
          << report;
      EXPECT_NE(report.find("the trial replayed from one recording (1 recorded"), std::string::npos)
          << report;
    }
  }
}

TEST_P(LmStepOn, EqualsTheFloat64ReferenceStep) {
  const Case c = GetParam();
  Rng rng(17);
  const std::vector<double> x = random_vector(kBatch * kIn, rng);
  std::vector<double> y(kBatch);
  for (std::size_t b = 0; b < kBatch; ++b)
    y[b] = std::sin(2 * x[b * kIn]) * std::cos(x[b * kIn + 1]);
  std::vector<double> theta = random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6);
  if (c.precision != Precision::kFloat64) {  // as the float32 model holds it
    const std::vector<float> rounded = cast<float>(theta);
    theta.assign(rounded.begin(), rounded.end());
  }

  SolverOptions o;
  o.lambda_initial = o.lambda_min = kLambda;  // a fixed λ: the first attempt is the reference's
  o.geodesic_acceleration = c.geodesic;
  if (c.precision == Precision::kMixed) o.system_precision = SystemPrecision::kFloat64;
  StepReport report;
  const std::vector<double> got = c.precision == Precision::kFloat64
                                      ? library_step<double>(c.device, theta, x, y, o, &report)
                                      : library_step<float>(c.device, theta, x, y, o, &report);
  ASSERT_TRUE(report.accepted) << "the reference step lowers F at this λ";
  EXPECT_EQ(report.attempts, 1);
  if (c.geodesic) {
    EXPECT_EQ(report.geodesic_applied, 1) << "the correction passes the ratio test";
  }
  const std::vector<double> expected = reference_step(theta, x, y, c.geodesic, o);
  // Central differences carry ~1e-9 of J's scale; float32 J and activations ~1e-6, and the
  // solve of a system with cond(JᵀJ + λI) ≈ 1e3 multiplies that.
  const double tolerance = c.precision == Precision::kFloat64 ? 1e-7 : 3e-4;
  double step_size = 0;
  for (std::size_t k = 0; k < theta.size(); ++k)
    step_size = std::max(step_size, std::fabs(expected[k] - theta[k]));
  ASSERT_GT(step_size, 1e-2) << "a step that moves θ, so the comparison means something";
  EXPECT_LE(relative_error(got, expected), tolerance);
  if (!c.geodesic) return;
  // The correction is large enough for the comparison to see it.
  const std::vector<double> plain = reference_step(theta, x, y, false, o);
  EXPECT_GT(relative_error(plain, expected), 10 * tolerance);
  // With a ratio it fails (decided on the device, read with the trial) δ stays the plain one, and
  // the report says the correction was refused.
  o.geodesic_ratio = 1e-3;
  const std::vector<double> refused = c.precision == Precision::kFloat64
                                          ? library_step<double>(c.device, theta, x, y, o, &report)
                                          : library_step<float>(c.device, theta, x, y, o, &report);
  ASSERT_TRUE(report.accepted);
  EXPECT_EQ(report.geodesic_applied, 0);
  EXPECT_EQ(report.geodesic_refused, 1);
  EXPECT_LE(relative_error(refused, plain), tolerance);
}

// Invalid attempts found by the read after their trial (one rank reads an attempt's verdict
// with its trial's scalars, lm_step.h) leave no trace: with six of the seven hidden units dead
// (output weight 0) their input weights' columns of J are exactly 0, and a float32 λ of 1e-50
// rounds to 0, so the Cholesky factorization meets an exact zero pivot on every kernel path —
// attempts fail until λ, doubled by ν = 2, 4, 8, …, is a float32 denormal.  The accepted step
// must be the reference's at that λ (the dead units' columns decouple: δ is 0 there), the
// geodesic correction counted once (for the valid attempt only), and λ raised by the invalid
// attempts alone.
TEST(LmStep, InvalidAttemptsFoundAfterTheirTrialLeaveNoTrace) {
  Rng rng(23);
  const std::vector<double> x = random_vector(kBatch * kIn, rng);
  std::vector<double> theta = random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6);
  double* w2 = theta.data() + kHidden * kIn + kHidden;
  for (std::size_t h = 1; h < kHidden; ++h) w2[h] = 0.0;
  // Targets the network reaches near θ, so that the undamped Gauss–Newton step is accepted.
  std::vector<double> target = theta;
  for (double& t : target) t += 0.05 * rng.normal();
  const std::vector<double> y = residuals(target, x, std::vector<double>(kBatch, 0.0));
  const std::vector<float> rounded = cast<float>(theta);
  theta.assign(rounded.begin(), rounded.end());
  SolverOptions o;
  o.lambda_initial = o.lambda_min = 1e-50;
  o.geodesic_acceleration = true;
  o.max_attempts = 20;
  StepReport report;
  const std::vector<double> got = library_step<float>("cpu", theta, x, y, o, &report);
  ASSERT_TRUE(report.accepted) << report.attempts << " attempts, " << report.invalid << " invalid, "
                               << report.rejected << " rejected, λ " << report.lambda << ": "
                               << report.message;
  EXPECT_GE(report.invalid, 1);
  EXPECT_EQ(report.attempts, report.invalid + report.rejected + 1);
  EXPECT_EQ(report.geodesic_applied + report.geodesic_refused + report.geodesic_skipped,
            report.rejected + 1);
  const std::vector<double> expected = reference_step(theta, x, y, report.geodesic_applied == 1, o,
                                                      static_cast<float>(report.lambda));
  for (std::size_t h = 1; h < kHidden; ++h)  // the dead units' input weights did not move
    for (std::size_t i = 0; i < kIn; ++i)
      EXPECT_EQ(got[h * kIn + i], theta[h * kIn + i]) << "unit " << h;
  EXPECT_LE(relative_error(got, expected), 3e-4);
  double step_size = 0;
  for (std::size_t k = 0; k < theta.size(); ++k)
    step_size = std::max(step_size, std::fabs(expected[k] - theta[k]));
  EXPECT_GT(step_size, 1e-2);
}

// SolverOptions::damping_per_sample: λ is per sample, the system (JᵀJ + λ·B·I)δ = Jᵀr with B the
// batch's samples.  λ = kLambda / B per sample must give the reference step at kLambda, and the
// report keeps λ per sample.
TEST(DampingPerSample, IsTheReferenceStepAtLambdaTimesTheBatch) {
  Rng rng(29);
  const std::vector<double> x = random_vector(kBatch * kIn, rng);
  std::vector<double> y(kBatch);
  for (std::size_t b = 0; b < kBatch; ++b) y[b] = std::cos(x[b * kIn] + 2 * x[b * kIn + 1]);
  const std::vector<double> theta = random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6);
  SolverOptions o;
  o.lambda_initial = o.lambda_min = kLambda / kBatch;  // 0.0625: B·λ = kLambda exactly
  o.damping_per_sample = true;
  o.geodesic_acceleration = false;
  StepReport report;
  const std::vector<double> got = library_step<double>("cpu", theta, x, y, o, &report);
  ASSERT_TRUE(report.accepted);
  EXPECT_EQ(report.attempts, 1);
  EXPECT_EQ(report.lambda, kLambda / kBatch);
  const std::vector<double> expected = reference_step(theta, x, y, false, o);
  EXPECT_LE(relative_error(got, expected), 1e-7);
  // Without it the same λ damps 48 times less: a step far from the reference's.
  o.damping_per_sample = false;
  const std::vector<double> undamped = library_step<double>("cpu", theta, x, y, o, &report);
  EXPECT_GT(relative_error(undamped, expected), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    DevicesAndPrecisions, LmStepOn,
    ::testing::Values(
        Case{"cpu", Precision::kFloat32, false}, Case{"cpu", Precision::kMixed, false},
        Case{"cpu", Precision::kFloat64, false}, Case{"cpu", Precision::kFloat32, true},
        Case{"cpu", Precision::kMixed, true}, Case{"cpu", Precision::kFloat64, true},
        Case{"cuda", Precision::kFloat32, false}, Case{"cuda", Precision::kMixed, false},
        Case{"cuda", Precision::kFloat64, false}, Case{"cuda", Precision::kFloat32, true},
        Case{"cuda", Precision::kMixed, true}, Case{"cuda", Precision::kFloat64, true},
        Case{"recording", Precision::kFloat32, false}, Case{"recording", Precision::kMixed, false},
        Case{"recording", Precision::kFloat64, false}, Case{"recording", Precision::kFloat32, true},
        Case{"recording", Precision::kMixed, true}, Case{"recording", Precision::kFloat64, true}),
    [](const auto& param_info) { return name(param_info.param); });

// Σ r² over each block's rows of the host reference's residuals, times its scale.
std::vector<double> reference_block_losses(const std::vector<ResidualBlock>& blocks,
                                           const std::vector<double>& r) {
  std::vector<double> out;
  for (const ResidualBlock& b : blocks) {
    double sum = 0;
    for (std::size_t i = b.first_row; i < b.first_row + b.rows; ++i) sum += r[i] * r[i];
    out.push_back(b.scale * sum);
  }
  return out;
}

// Two steps on a source with blocks; each report's block losses against the host reference's
// residuals at the parameters that step started from.
template <typename T>
void check_block_losses(const Case& c) {
  Rng rng(23);
  const std::vector<double> x = random_vector(kBatch * kIn, rng);
  std::vector<double> y(kBatch);
  for (std::size_t b = 0; b < kBatch; ++b) y[b] = std::tanh(x[b * kIn] - x[b * kIn + 1]);
  Problem<T> p(backend_on<T>(c.device), ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh),
               LossOptions{}, x, y, kBatch);
  p.set_params(random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6));
  // Uneven blocks over all 48 rows, scale ½ (each block's part of F = ½‖r‖²), and a scaled one
  // (a PINN's 1/w²) and an empty one beside them.
  const std::vector<ResidualBlock> halves = {
      {"interior", 0, 29, 0.5}, {"boundary", 29, 0, 0.5}, {"initial", 29, 19, 0.5}};
  const std::vector<ResidualBlock> scaled = {{"interior", 0, 29, 0.25}, {"tail", 40, 8, 1e3}};
  // More blocks than the step has slots for (kBlockSlots = 8): each block's sum is read alone.
  std::vector<ResidualBlock> many;
  for (std::size_t b = 0; b < 12; ++b) many.push_back({"part" + std::to_string(b), 4 * b, 4, 0.5});
  const std::vector<ResidualBlock>* sets[] = {&halves, &scaled, &many};
  for (const std::vector<ResidualBlock>* set : sets) {
    const std::vector<ResidualBlock>& blocks = *set;
    const bool covers_all = set != &scaled;
    BlockSource<T> source(*p.source, blocks);
    SolverOptions o;
    if (c.precision == Precision::kMixed) o.system_precision = SystemPrecision::kFloat64;
    auto step = make_lm_step<T>(o, LinearSolverType::kCholesky, source, 16, kBatch);
    for (int k = 0; k < 2; ++k) {
      const std::vector<double> theta = p.download(p.params.data(), p.model->num_params());
      const std::vector<double> expected = reference_block_losses(blocks, residuals(theta, x, y));
      PhaseTimes times;
      const StepReport report = step->step(p.params.data(), p.x.data(), p.y.data(), kBatch, times);
      ASSERT_TRUE(report.accepted) << "the second step must start from other parameters";
      ASSERT_EQ(report.block_losses.size(), blocks.size());
      // Up to 8 blocks' sums come back with the linearization's scalars, more with a read each.
      EXPECT_EQ(report.host_reads, 1 + report.attempts + (set == &many ? 12 : 0));
      double sum = 0;
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        EXPECT_EQ(report.block_losses[b].name, blocks[b].name);
        // The residuals in T against the host's double: float32 rounds each r_i by ~6e-8 of the
        // outputs (|z| ≲ 2 here), so Σr² moves by up to 2·Σ|r_i|·1.2e-7 ≤ 2.4e-7·√(rows·Σr²) —
        // relative to a small block's Σr² far more than 1e-4 (measured 1.3e-4 on a 4-row block
        // after a step): held to 1e-4 relative plus 10 times that absolute bound.
        const bool f64 = c.precision == Precision::kFloat64;
        const double rows = static_cast<double>(blocks[b].rows);
        const double absolute =
            f64 ? 1e-300
                : 2.4e-6 * blocks[b].scale * std::sqrt(rows * expected[b] / blocks[b].scale);
        EXPECT_NEAR(report.block_losses[b].loss, expected[b],
                    (f64 ? 1e-12 : 1e-4) * expected[b] + absolute)
            << blocks[b].name << " at step " << k;
        sum += report.block_losses[b].loss;
      }
      if (covers_all) {  // an empty block is 0; ½ Σ over all rows is the objective (no penalty)
        if (set == &halves) {
          EXPECT_EQ(report.block_losses[1].loss, 0.0);
        }
        EXPECT_NEAR(sum, report.objective_before,
                    (c.precision == Precision::kFloat64 ? 1e-12 : 1e-4) * sum);
      }
    }
  }
}

class ResidualBlocksOn : public OnDevice {};

TEST_P(ResidualBlocksOn, LossesAreTheBlockSumsBeforeTheUpdate) {
  const Case c = GetParam();
  if (c.precision == Precision::kFloat64)
    check_block_losses<double>(c);
  else
    check_block_losses<float>(c);
}

INSTANTIATE_TEST_SUITE_P(DevicesAndPrecisions, ResidualBlocksOn,
                         ::testing::Values(Case{"cpu", Precision::kFloat32, false},
                                           Case{"cpu", Precision::kMixed, false},
                                           Case{"cpu", Precision::kFloat64, false},
                                           Case{"cuda", Precision::kMixed, false},
                                           Case{"cuda", Precision::kFloat64, false}),
                         [](const auto& param_info) { return name(param_info.param); });

TEST(ResidualBlocks, ABlockOutsideTheBatchIsRefusedByName) {
  Rng rng(5);
  const std::vector<double> x = random_vector(kBatch * kIn, rng), y(kBatch, 0.5);
  Problem<double> p(ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh), LossOptions{}, x, y,
                    kBatch);
  p.set_params(random_vector(kHidden * kIn + 2 * kHidden + 1, rng, 0.6));
  BlockSource<double> source(*p.source, {{"pde", 0, 40, 1.0}, {"boundary", 40, 9, 1.0}});
  auto step =
      make_lm_step<double>(SolverOptions{}, LinearSolverType::kCholesky, source, 16, kBatch);
  PhaseTimes times;
  try {
    step->step(p.params.data(), p.x.data(), p.y.data(), kBatch, times);
    FAIL() << "a block past the batch's 48 rows must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("\"boundary\" as rows [40, 49)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("48 residual rows"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::testing
