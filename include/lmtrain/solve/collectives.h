// The LM step's sums and broadcasts over the ranks (DESIGN.md §6), on the system's backend:
//   NCCL         device buffers summed in place on the device, enqueued on the backend's stream;
//   MPI, CPU     host buffers (the CPU backend's device memory is host memory);
//   MPI, CUDA    through host memory ("host" communicator): device → host, MPI, host → device.
// With one rank and no NCCL every call is an identity that costs nothing.  With NCCL even one
// rank takes part, so that a single GPU runs (and checks) the NCCL path against the local one.
// Every call is timed as communication, into the PhaseTimes given to time_into() (the step sets
// it at the start of every step).  Used by the LM step, its penalties, its damping and CG.
#pragma once

#include <cstddef>
#include <vector>

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/core/timer.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain {

template <typename S>
class Collectives {
 public:
  // `comm` may be null (one rank).
  Collectives(LinearAlgebra<S>& backend, dist::Communicator* comm)
      : backend_(backend), comm_(comm) {}

  // Several ranks, or NCCL with one: the sums and broadcasts below do something.
  bool active() const {
    return comm_ != nullptr && (comm_->size() > 1 || comm_->supports_device_buffers());
  }
  // Rank 0 (or the only rank): where dense solves and decisions are made.
  bool is_root() const { return comm_ == nullptr || comm_->is_root(); }
  int ranks() const { return comm_ != nullptr ? comm_->size() : 1; }
  dist::Communicator* communicator() const { return comm_; }
  // Where the calls' time goes from now on.
  void time_into(PhaseTimes& times) { times_ = &times; }

  // Σ over the ranks of a host scalar.
  double sum(double local);
  // In-place sums of n host values (a few figures of a report).
  void sum_host(double* host_values, std::size_t n);
  // In-place sums of n values of a device buffer.
  void sum_device(S* device_data, std::size_t n);
  // Rank 0's n device values to every rank, in place.
  void broadcast_device(S* device_data, std::size_t n);
  // Rank 0's host values (a decision and its figures) to every rank, in place.
  void broadcast_host(double* host_values, std::size_t n);
  // Rank 0's verdict.
  bool broadcast_flag(bool root_value);

 private:
  bool on_device() const {
    return backend_.device_kind() != DeviceKind::kCpu && comm_->supports_device_buffers();
  }
  LinearAlgebra<S>& backend_;
  dist::Communicator* comm_;
  std::vector<S> staging_;  // host copy for a device buffer over a host communicator
  PhaseTimes unused_;
  PhaseTimes* times_ = &unused_;
};

}  // namespace lmtrain
