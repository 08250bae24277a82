// Errors thrown at lmtrain's API boundaries.  Every message says what was wrong, which value
// caused it and what to do instead; hot loops report through status codes, never exceptions.
#pragma once

#include <stdexcept>
#include <string>

namespace lmtrain {

// Base of every error lmtrain throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An option, argument or shape that violates a documented constraint.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// The memory plan cannot fit the problem (for example A = JᵀJ alone exceeds the budget).
// Raised before training starts, with the sizes and the ways out.
class MemoryPlanError : public Error {
 public:
  using Error::Error;
};

// A device allocation failed at run time (the device had less free memory than planned: another
// process, fragmentation, a library's workspace).  The trainer answers it by halving the
// Jacobian slice and retrying the step; it reaches the caller only at a one-sample slice.
class OutOfMemory : public MemoryPlanError {
 public:
  using MemoryPlanError::MemoryPlanError;
};

// A backend call (BLAS, LAPACK, CUDA) failed in a way that is not a recoverable numerical event.
class BackendError : public Error {
 public:
  using Error::Error;
};

}  // namespace lmtrain
