#include "python_communicator.h"

#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "lmtrain/core/error.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

template <typename V>
nb::object tensor_view(V* data, std::size_t n, int device_type, int device_id) {
  nb::ndarray<nb::pytorch, V, nb::ndim<1>> a(data, {n}, nb::handle(), {}, nb::dtype<V>(),
                                             device_type, device_id);
  return nb::cast(a, nb::rv_policy::reference);
}

}  // namespace

PythonCommunicator::PythonCommunicator(nb::object group, int cuda_device)
    : group_(std::move(group)), cuda_device_(cuda_device) {
  rank_ = nb::cast<int>(group_.attr("rank"));
  size_ = nb::cast<int>(group_.attr("size"));
  device_buffers_ = nb::cast<bool>(group_.attr("device_buffers"));
  name_ = nb::str(group_.attr("name")).c_str();
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw InvalidArgument(fmt::format("communicator rank {} of {} ranks", rank_, size_));
}

void PythonCommunicator::call(const char* method, nb::object tensor, int root) {
  try {
    if (root >= 0)
      group_.attr(method)(tensor, root);
    else
      group_.attr(method)(tensor);
  } catch (nb::python_error& e) {
    throw Error(fmt::format("rank {}: torch.distributed {} failed: {}", rank_, method, e.what()));
  }
}

template <typename V>
void PythonCommunicator::reduce(V* data, std::size_t n, int device_type) {
  if (n == 0) return;
  nb::gil_scoped_acquire gil;
  call("all_reduce", tensor_view(data, n, device_type, cuda_device_));
}

void PythonCommunicator::allreduce_sum(double* data, std::size_t n) {
  reduce(data, n, nb::device::cpu::value);
}
void PythonCommunicator::allreduce_sum(float* data, std::size_t n) {
  reduce(data, n, nb::device::cpu::value);
}
void PythonCommunicator::allreduce_sum_device(float* data, std::size_t n, void*) {
  reduce(data, n, nb::device::cuda::value);
}
void PythonCommunicator::allreduce_sum_device(double* data, std::size_t n, void*) {
  reduce(data, n, nb::device::cuda::value);
}

void PythonCommunicator::broadcast(void* data, std::size_t bytes, int root) {
  if (bytes == 0) return;
  nb::gil_scoped_acquire gil;
  call("broadcast", tensor_view(static_cast<std::uint8_t*>(data), bytes, nb::device::cpu::value, 0),
       root);
}

void PythonCommunicator::broadcast_device(void* data, std::size_t bytes, int root, void*) {
  if (bytes == 0) return;
  nb::gil_scoped_acquire gil;
  call("broadcast",
       tensor_view(static_cast<std::uint8_t*>(data), bytes, nb::device::cuda::value, cuda_device_),
       root);
}

void PythonCommunicator::allgather(const void* mine, std::size_t bytes, void* all) {
  nb::gil_scoped_acquire gil;
  auto* in = static_cast<std::uint8_t*>(const_cast<void*>(mine));
  auto* out = static_cast<std::uint8_t*>(all);
  try {
    group_.attr("all_gather")(
        tensor_view(in, bytes, nb::device::cpu::value, 0),
        tensor_view(out, bytes * static_cast<std::size_t>(size_), nb::device::cpu::value, 0));
  } catch (nb::python_error& e) {
    throw Error(fmt::format("rank {}: torch.distributed all_gather failed: {}", rank_, e.what()));
  }
}

void PythonCommunicator::abort(int code, const std::string& message) {
  // torchrun's agent sees this process exit and ends the other ranks.
  std::fprintf(stderr, "lmtrain: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace lmtrain::python
