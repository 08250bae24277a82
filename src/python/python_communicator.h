// The ranks of lmtrain.torch under torchrun: a dist::Communicator whose collectives are Python
// calls into torch.distributed, on tensors that view lmtrain's own buffers (DLPack, no copy).  The
// LM step then sums A and g, broadcasts δ and agrees on decisions exactly as it does over MPI or
// NCCL (DESIGN.md §9: one all-reduce of A and g per step, on device buffers with NCCL).
//
// The Python object has `rank` and `size` (ints), `name` (a str for the Summary), `device_buffers`
// (True when its collectives take CUDA tensors: the NCCL backend) and the methods
//   all_reduce(tensor)            in-place sum over the ranks
//   broadcast(tensor, root)       in place, from `root`
//   all_gather(mine, all)         `all` (size · len(mine) bytes) receives every rank's `mine`
// A collective that raises ends the step with lmtrain::Error carrying Python's message.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "lmtrain/backend/device_queue.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain::python {

class PythonCommunicator final : public dist::Communicator {
 public:
  // `cuda_device`: the CUDA device index of the device buffers (unused on the CPU).
  PythonCommunicator(nanobind::object group, int cuda_device);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  void allreduce_sum(double* data, std::size_t n) override;
  void allreduce_sum(float* data, std::size_t n) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void allgather(const void* mine, std::size_t bytes, void* all) override;
  bool supports_device_buffers() const override { return device_buffers_; }
  void allreduce_sum_device(float* device_data, std::size_t n, void* cuda_stream) override;
  void allreduce_sum_device(double* device_data, std::size_t n, void* cuda_stream) override;
  void broadcast_device(void* device_data, std::size_t bytes, int root, void* cuda_stream) override;
  [[noreturn]] void abort(int code, const std::string& message) override;
  // For the cyclic garbage collector (see ForeignSource::callbacks).
  nanobind::handle group() const { return group_; }
  void clear_group() { group_ = nanobind::none(); }

 private:
  template <typename V>
  void reduce(V* data, std::size_t n, int device_type);
  void call(const char* method, nanobind::object tensor, int root = -1);

  nanobind::object group_;
  int rank_ = 0, size_ = 1, cuda_device_ = 0;
  bool device_buffers_ = false;
  std::string name_;
};

// The ranks of an MPI launch (`mpirun -np R python train.py`) as lmtrain.torch's communicator:
// lmtrain's own MPI communicator, one per process (MPI is finalized when the last owner lets it
// go), which ScaLAPACK's distributed_cholesky needs and torch.distributed cannot give.  Python
// sees `rank`, `size`, `name` and all_reduce(array) for its own few scalars.
class MpiRanks {
 public:
  MpiRanks();
  std::shared_ptr<dist::Communicator> communicator() const { return comm_; }

 private:
  std::shared_ptr<dist::Communicator> comm_;
};

// The communicator of a step on `backend` from what lmtrain.torch hands over: none (one rank),
// an MpiRanks (over NCCL on a GPU when NCCL loads: cuSOLVERMp and the device collectives need
// it), or a torch.distributed wrapper (PythonCommunicator).
std::unique_ptr<dist::Communicator> communicator_for(nanobind::object group,
                                                     const DeviceQueue& backend);

}  // namespace lmtrain::python
