// Why training stopped.
#pragma once

#include <string_view>

namespace lmtrain {

enum class TerminationReason {
  kNone,                // still running
  kMaxEpochs,           // trainer.max_epochs reached
  kLambdaAboveMax,      // a step was rejected with λ already at solver.lambda_max
  kGradientTolerance,   // ‖Jᵀr‖∞ ≤ solver.gradient_tolerance
  kFunctionTolerance,   // relative decrease ≤ solver.function_tolerance
  kParameterTolerance,  // ‖Δθ‖ ≤ solver.parameter_tolerance·(‖θ‖ + tol)
  kLossGoal,            // training loss ≤ trainer.loss_goal
  kTimeBudget,          // wall clock ≥ trainer.max_time_seconds
  kValidationMaxFail,  // validation loss did not improve for trainer.max_validation_failures epochs
  kUserCallback,       // the iteration callback asked to stop
  kNonFiniteObjective,  // the loss at the current parameters is NaN or ±∞
  kInterrupted,         // the stop flag was raised (SIGINT/SIGTERM in the command-line tool)
};

constexpr std::string_view to_string(TerminationReason r) {
  switch (r) {
    case TerminationReason::kNone:
      return "none";
    case TerminationReason::kMaxEpochs:
      return "max_epochs";
    case TerminationReason::kLambdaAboveMax:
      return "lambda_above_max";
    case TerminationReason::kGradientTolerance:
      return "gradient_tolerance";
    case TerminationReason::kFunctionTolerance:
      return "function_tolerance";
    case TerminationReason::kParameterTolerance:
      return "parameter_tolerance";
    case TerminationReason::kLossGoal:
      return "loss_goal";
    case TerminationReason::kTimeBudget:
      return "time_budget";
    case TerminationReason::kValidationMaxFail:
      return "validation_max_fail";
    case TerminationReason::kUserCallback:
      return "user_callback";
    case TerminationReason::kNonFiniteObjective:
      return "non_finite_objective";
    case TerminationReason::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

// True for reasons that mean "converged" rather than "stopped" or "failed".
constexpr bool is_convergence(TerminationReason r) {
  return r == TerminationReason::kGradientTolerance || r == TerminationReason::kFunctionTolerance ||
         r == TerminationReason::kParameterTolerance || r == TerminationReason::kLossGoal;
}

}  // namespace lmtrain
