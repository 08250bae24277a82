// A communicator that hands every call to another: the base of the decorators over a host
// communicator — share_communicator (several owners of one MPI communicator) and the NCCL
// communicator, which adds the device-buffer collectives.  A decorator overrides what it adds.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>

#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(std::shared_ptr<Communicator> to) : to_(std::move(to)) {}

  int rank() const override { return to_->rank(); }
  int size() const override { return to_->size(); }
  int local_rank() const override { return to_->local_rank(); }
  std::string name() const override { return to_->name(); }
  void allreduce_sum(double* data, std::size_t n) override { to_->allreduce_sum(data, n); }
  void allreduce_sum(float* data, std::size_t n) override { to_->allreduce_sum(data, n); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    to_->broadcast(data, bytes, root);
  }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    to_->allgather(mine, bytes, all);
  }
  void reduce_scatter_sum(const double* send, double* recv,
                          std::span<const std::size_t> counts) override {
    to_->reduce_scatter_sum(send, recv, counts);
  }
  void reduce_scatter_sum(const float* send, float* recv,
                          std::span<const std::size_t> counts) override {
    to_->reduce_scatter_sum(send, recv, counts);
  }
  bool supports_device_buffers() const override { return to_->supports_device_buffers(); }
  void allreduce_sum_device(float* data, std::size_t n, void* stream) override {
    to_->allreduce_sum_device(data, n, stream);
  }
  void allreduce_sum_device(double* data, std::size_t n, void* stream) override {
    to_->allreduce_sum_device(data, n, stream);
  }
  void broadcast_device(void* data, std::size_t bytes, int root, void* stream) override {
    to_->broadcast_device(data, bytes, root, stream);
  }
  const void* mpi_comm() const override { return to_->mpi_comm(); }
  void* nccl_comm() const override { return to_->nccl_comm(); }
  [[noreturn]] void abort(int code, const std::string& message) override {
    to_->abort(code, message);
    std::abort();  // unreachable: every communicator's abort ends the job or throws
  }

 protected:
  Communicator& to() const { return *to_; }

 private:
  std::shared_ptr<Communicator> to_;
};

}  // namespace lmtrain::dist
