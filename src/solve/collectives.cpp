#include "lmtrain/solve/collectives.h"

namespace lmtrain {

template <typename S>
double Collectives<S>::sum(double local) {
  if (!active()) return local;
  ScopedPhase timer(*times_, Phase::kCommunication);
  return comm_->sum(local);
}

template <typename S>
void Collectives<S>::sum_host(double* host_values, std::size_t n) {
  if (!active() || n == 0) return;
  ScopedPhase timer(*times_, Phase::kCommunication);
  comm_->allreduce_sum(host_values, n);
}

template <typename S>
void Collectives<S>::sum_device(S* device_data, std::size_t n) {
  if (!active()) return;
  if (on_device()) {
    // NCCL: summed in place, ordered after the work already queued on the stream.
    ScopedPhase timer(*times_, Phase::kCommunication);
    comm_->allreduce_sum_device(device_data, n, backend_.native_stream());
    backend_.synchronize();
    return;
  }
  backend_.synchronize();  // the device's earlier phases are timed by their own clocks
  ScopedPhase timer(*times_, Phase::kCommunication);
  if (backend_.device_kind() == DeviceKind::kCpu) {
    comm_->allreduce_sum(device_data, n);
    return;
  }
  staging_.resize(n);
  backend_.copy_to_host(device_data, staging_.data(), n);
  comm_->allreduce_sum(staging_.data(), n);
  backend_.copy_from_host(staging_.data(), device_data, n);
}

template <typename S>
void Collectives<S>::broadcast_device(S* device_data, std::size_t n) {
  if (!active()) return;
  if (on_device()) {
    ScopedPhase timer(*times_, Phase::kCommunication);
    comm_->broadcast_device(device_data, n * sizeof(S), 0, backend_.native_stream());
    backend_.synchronize();
    return;
  }
  backend_.synchronize();  // the device's earlier phases are timed by their own clocks
  ScopedPhase timer(*times_, Phase::kCommunication);
  if (backend_.device_kind() == DeviceKind::kCpu) {
    comm_->broadcast(device_data, n * sizeof(S), 0);
    return;
  }
  staging_.resize(n);
  backend_.copy_to_host(device_data, staging_.data(), n);
  comm_->broadcast(staging_.data(), n * sizeof(S), 0);
  backend_.copy_from_host(staging_.data(), device_data, n);
}

template <typename S>
void Collectives<S>::broadcast_host(double* host_values, std::size_t n) {
  if (!active()) return;
  ScopedPhase timer(*times_, Phase::kCommunication);
  comm_->broadcast(host_values, n * sizeof(double), 0);
}

template <typename S>
bool Collectives<S>::broadcast_flag(bool root_value) {
  if (!active()) return root_value;
  ScopedPhase timer(*times_, Phase::kCommunication);
  int flag = root_value ? 1 : 0;
  comm_->broadcast(&flag, sizeof flag, 0);
  return flag != 0;
}

template class Collectives<float>;
template class Collectives<double>;

}  // namespace lmtrain
