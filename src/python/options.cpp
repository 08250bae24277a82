// SolverOptions, TrainerOptions and LossOptions as Python classes with one attribute per field,
// under the C++ field's name.  Each class lists its fields with their kinds (`fields`), so the
// Python layer checks keyword arguments against the library's own option set: a field added to
// solver_options.h reaches Python by one line here.  Enumerations are their names as strings.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmtrain/backend/cpu_threads.h"
#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/nn/loss.h"
#include "lmtrain/solve/solver_options.h"
#include "lmtrain/train/trainer.h"
#include "module.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

// A bound options class and the (name, kind) of each field: kind is "float", "int" (signed),
// "count" (unsigned), "bool", "optional bool" (None: auto), "str" or "float list".
template <typename Options>
class OptionsBinding {
 public:
  OptionsBinding(nb::module_& m, const char* name, const char* doc) : class_(m, name, doc) {
    class_.def(nb::init<>());
  }
  template <typename Field>
  OptionsBinding& field(const char* name, Field Options::*member, const char* kind,
                        const char* doc) {
    class_.def_rw(name, member, doc);
    fields_.emplace_back(name, kind);
    return *this;
  }
  // An enumeration field as its name: `to_text` and `parse` are the library's to_string/parse_*.
  template <typename Enum, typename ToText, typename Parse>
  OptionsBinding& choice(const char* name, Enum Options::*member, ToText to_text, Parse parse,
                         std::vector<std::string_view> names, const char* doc) {
    class_.def_prop_rw(
        name, [member, to_text](const Options& o) { return std::string(to_text(o.*member)); },
        [member, parse, name, names](Options& o, const std::string& value) {
          const std::optional<Enum> parsed = parse(value);
          if (!parsed)
            throw nb::value_error(fmt::format("{} = \"{}\": expected one of \"{}\"", name, value,
                                              fmt::join(names, "\", \""))
                                      .c_str());
          o.*member = *parsed;
        },
        doc);
    fields_.emplace_back(name, "str");
    return *this;
  }
  nb::class_<Options>& done() {
    class_.def_static(
        "fields", [fields = fields_] { return fields; },
        "The (name, kind) of every option: kind is float, int, count (non-negative int), bool, "
        "str or float list.");
    return class_;
  }

 private:
  nb::class_<Options> class_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

void bind_solver_options(nb::module_& m) {
  using S = SolverOptions;
  OptionsBinding<S>(m, "SolverOptions",
                    "lmtrain::SolverOptions (include/lmtrain/solve/solver_options.h): the LM "
                    "step's options, each documented there with its default.")
      .choice(
          "linear_solver", &S::linear_solver, [](LinearSolverType t) { return to_string(t); },
          parse_linear_solver, {"auto", "cholesky", "dual", "eigen", "cg"},
          "How (JᵀJ + λD)δ = Jᵀr is solved: auto, cholesky, dual, eigen or cg.")
      .choice(
          "system_precision", &S::system_precision, [](SystemPrecision p) { return to_string(p); },
          parse_system_precision, {"auto", "model", "float64"},
          "A, g and the solve: auto (the library chooses per problem and device), model (the "
          "model's precision) or float64 (mixed precision for a float32 model).")
      .choice(
          "damping", &S::damping, [](DampingType t) { return to_string(t); }, parse_damping,
          {"multiplicative", "nielsen"}, "λ's schedule: nielsen (default) or multiplicative.")
      .choice(
          "normal_matrix", &S::normal_matrix, [](NormalMatrixMethod way) { return to_string(way); },
          parse_normal_matrix_method, {"auto", "syrk", "split_k"},
          "How A = JᵀJ is formed: auto (CUDA: SYRK or split-K, measured per shape; CPU: "
          "SYRK), syrk, or split_k (on the CPU too).")
      .choice(
          "damping_matrix", &S::damping_matrix, [](DampingMatrix t) { return to_string(t); },
          parse_damping_matrix, {"identity", "marquardt"},
          "D: identity (Levenberg) or marquardt (clamped diag(JᵀJ)).")
      .choice(
          "regularization", &S::regularization, [](Regularization r) { return to_string(r); },
          parse_regularization, {"none", "l2", "bayesian", "ard"},
          "none, l2 (½ρ‖θ‖², ρ = weight_decay), bayesian (MacKay's evidence, MATLAB "
          "trainbr) or ard (one ρ per input, per layer's weights and biases).")
      .field("lambda_initial", &S::lambda_initial, "float", "Initial λ.")
      .field("lambda_min", &S::lambda_min, "float", "Lower clamp of λ.")
      .field("lambda_max", &S::lambda_max, "float",
             "Upper clamp of λ; a rejection at lambda_max (multiplicative: one raising λ to it) "
             "ends training.")
      .field("lambda_increase", &S::lambda_increase, "float", "multiplicative: λ ← λ·increase.")
      .field("lambda_decrease", &S::lambda_decrease, "float", "multiplicative: λ ← λ·decrease.")
      .field("damping_per_sample", &S::damping_per_sample, "bool",
             "λ per sample: (JᵀJ/B + λD)δ = Jᵀr/B with B the step's samples, as cuPyLMA and "
             "torch-levenberg-marquardt damp.")
      .field("restart_lambda_at_max", &S::restart_lambda_at_max, "bool",
             "After a step ends at lambda_max, start the next from lambda_initial (cuPyLMA).")
      .field("marquardt_min", &S::marquardt_min, "float", "Lower clamp of Marquardt's D.")
      .field("marquardt_max", &S::marquardt_max, "float", "Upper clamp of Marquardt's D.")
      .field("learning_rate", &S::learning_rate, "float", "θ ← θ − learning_rate·δ.")
      .field("max_attempts", &S::max_attempts, "int", "Solves per LM step before giving it up.")
      .field("geodesic_acceleration", &S::geodesic_acceleration, "optional bool",
             "Second-order correction of each step (Transtrum & Sethna); None (auto): on, except "
             "with the softmax losses (cross_entropy, cross_entropy_sqrt, cross_entropy_sampled).")
      .field("geodesic_ratio", &S::geodesic_ratio, "float",
             "Keep the correction a only when 2‖a‖ ≤ geodesic_ratio·‖v‖.")
      .field("geodesic_step", &S::geodesic_step, "float",
             "Finite-difference step h of the second directional derivative.")
      .field("geodesic_backoff_max", &S::geodesic_backoff_max, "int",
             "After a refused correction skip it for the next 1, 2, 4 … attempts, at most this "
             "many (0: compute it on every attempt; -1: 2 for a float32 model, 0 for float64).")
      .field("tf32", &S::tf32, "bool",
             "Form a float32 A on TF32 tensor cores (CUDA; ignored on the CPU and for a float64 "
             "system): faster, A rounded at about 1e-3 of float32's 1e-7.")
      .field("cuda_graphs", &S::cuda_graphs, "bool",
             "Launch each attempt's factorization and solve, its trial and (not in mixed "
             "precision) its geodesic correction as recorded CUDA graphs (the cholesky solver on "
             "one CUDA device; ignored elsewhere): the eager step's bits.")
      .field("gradient_tolerance", &S::gradient_tolerance, "float", "‖Jᵀr‖∞ stop (0: off).")
      .field("function_tolerance", &S::function_tolerance, "float",
             "Relative decrease of F stop (0: off).")
      .field("parameter_tolerance", &S::parameter_tolerance, "float",
             "Relative step size stop (0: off).")
      .field("weight_decay", &S::weight_decay, "float",
             "ρ of l2; the initial ρ of bayesian and ard (0: bayesian from the evidence estimate, "
             "ard from ard_initial_scale × the mean of diag(JᵀJ)).")
      .field("ard_initial_scale", &S::ard_initial_scale, "float",
             "ard: the starting ρ relative to the mean of diag(JᵀJ) (with weight_decay = 0).")
      .field("ard_max_factor", &S::ard_max_factor, "float",
             "ard: each evidence update moves each ρ by at most this factor (inf: undamped).")
      .field("memory_budget_bytes", &S::memory_budget_bytes, "count",
             "Bytes the LM step may use (0: memory_fraction of what is free).")
      .field("memory_fraction", &S::memory_fraction, "float",
             "Fraction of free memory the LM step may use.")
      .field("max_slice_samples", &S::max_slice_samples, "count",
             "Cap on samples per Jacobian slice (0: from the memory plan).")
      .field("cg_forcing", &S::cg_forcing, "float", "cg: relative residual target.")
      .field("cg_max_iterations", &S::cg_max_iterations, "count", "cg: iteration cap (0: n).")
      .done()
      .def(
          "apply_precision",
          [](S& s, const std::string& precision, bool float64_model) {
            const std::optional<Precision> p = parse_precision(precision);
            if (!p)
              throw InvalidArgument(
                  fmt::format("precision = \"{}\": expected \"auto\", \"float32\", \"mixed\" or "
                              "\"float64\"",
                              precision));
            s.system_precision = system_precision_for(*p, float64_model);
          },
          nb::arg("precision"), nb::arg("float64_model"),
          "Sets system_precision for a user's precision (auto, float32, mixed, float64) on a "
          "model of its own dtype (lmtrain::system_precision_for): float64 on a float32 model "
          "is mixed; ValueError when it asks for less than the model holds.")
      .def("validate", &S::validate,
           "Raises ValueError naming the first option outside its documented range.");
}

void bind_trainer_options(nb::module_& m) {
  using T = TrainerOptions;
  OptionsBinding<T>(m, "TrainerOptions",
                    "lmtrain::TrainerOptions (include/lmtrain/train/trainer.h): epochs, batches "
                    "and stopping.  The seed is set by fit's `seed`.")
      .field("max_epochs", &T::max_epochs, "int", "Passes over the training data.")
      .field("batch_size", &T::batch_size, "count",
             "Samples per LM step; 0 (or ≥ the samples) is the full batch.")
      .field("shuffle", &T::shuffle, "bool", "Reshuffle the samples every epoch (seeded).")
      .field("loss_goal", &T::loss_goal, "float", "Stop once the training loss ≤ loss_goal.")
      .field("max_time_seconds", &T::max_time_seconds, "float", "Wall-clock budget in seconds.")
      .field("max_validation_failures", &T::max_validation_failures, "int",
             "With validation data: epochs without a better validation loss before stopping.")
      .field("restore_best", &T::restore_best, "bool",
             "With validation data: end with the best validation model.")
      .field("stop_grace_s", &T::stop_grace_s, "float",
             "After the first Ctrl-C, the seconds the LM step under way may take before "
             "KeyboardInterrupt is raised at once (a second Ctrl-C does not wait).")
      .done()
      .def_rw("seed", &T::seed,
              "The shuffling RNG's seed (not one of fit's options: fit's `seed` sets it).")
      .def("validate", &T::validate,
           "Raises ValueError naming the first option outside its documented range.");
}

void bind_loss_options(nb::module_& m) {
  using L = LossOptions;
  OptionsBinding<L>(m, "LossOptions",
                    "lmtrain::LossOptions (include/lmtrain/nn/loss.h); the loss kind is `loss`.")
      .choice(
          "loss", &L::kind, [](LossKind k) { return to_string(k); }, parse_loss,
          {"mse", "cross_entropy", "cross_entropy_sqrt", "cross_entropy_sampled", "bce", "huber",
           "l1"},
          "mse, cross_entropy (exact Gauss–Newton), cross_entropy_sqrt, cross_entropy_sampled "
          "(cross_entropy's Gauss–Newton sampled with one row per sample), bce, huber or l1.")
      .field("output_weights", &L::output_weights, "float list",
             "mse: positive per-output weights (empty: all ones).")
      .field("huber_delta", &L::huber_delta, "float", "huber: transition point δ.")
      .done()
      .def("validate", &L::validate, nb::arg("outputs"),
           "Raises ValueError naming the option that does not fit `outputs` outputs.");
}

}  // namespace

void bind_options(nb::module_& m) {
  bind_solver_options(m);
  bind_trainer_options(m);
  bind_loss_options(m);
  // The library's rule for geodesic_acceleration unset (auto), so that the torch path resolves
  // it as the Trainer and the native step do instead of restating it.
  m.def(
      "geodesic_acceleration_for",
      [](const SolverOptions& options, const std::string& loss) {
        const std::optional<LossKind> kind = parse_loss(loss);
        if (!kind) throw nb::value_error(fmt::format("unknown loss \"{}\"", loss).c_str());
        return geodesic_acceleration_for(options, *kind);
      },
      nb::arg("options"), nb::arg("loss"),
      "SolverOptions.geodesic_acceleration with None (auto) resolved for `loss`.");
  // The loss users read from an objective, as the library reports it (core/loss_kind.h), so
  // that lmtrain.torch's evaluation does not restate the formulas.
  m.def(
      "reported_loss",
      [](const std::string& loss, double objective, std::size_t batch, std::size_t outputs) {
        const std::optional<LossKind> kind = parse_loss(loss);
        if (!kind) throw nb::value_error(fmt::format("unknown loss \"{}\"", loss).c_str());
        if (batch == 0 || outputs == 0) throw nb::value_error("batch and outputs must be > 0");
        return reported_loss(*kind, objective, batch, outputs);
      },
      nb::arg("loss"), nb::arg("objective"), nb::arg("batch"), nb::arg("outputs"),
      "The reported loss (PyTorch's mean reduction) of objective F over `batch` samples of "
      "`outputs` outputs (a residual function: loss 'mse', one output per residual row).");
  m.def("set_cpu_threads", &set_cpu_threads, nb::arg("threads"),
        "0: lmtrain chooses each phase's CPU thread count by measurement; n >= 1: every phase "
        "runs on n (at most the processors); for backends made afterwards.");
  m.def("cuda_backend_built", &cuda_backend_built,
        "Whether this build of lmtrain has its CUDA backend.");
}

}  // namespace lmtrain::python
