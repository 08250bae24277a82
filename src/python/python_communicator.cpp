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

MpiRanks::MpiRanks() {
  if (!dist::mpi_built())
    throw Error(
        "this lmtrain was built without MPI, so it cannot join the ranks of an mpirun launch; "
        "rebuild it with OpenMPI's development files (scripts/install-deps.sh), or launch with "
        "torchrun");
  comm_ = dist::make_mpi_communicator();
}

std::unique_ptr<dist::Communicator> communicator_for(nb::object group, const DeviceQueue& backend) {
  if (group.is_none()) return nullptr;
  if (nb::isinstance<MpiRanks>(group)) {
    std::unique_ptr<dist::Communicator> comm =
        dist::share_communicator(nb::cast<const MpiRanks&>(group).communicator());
    if (backend.device_kind() == DeviceKind::kCuda && dist::nccl_built() &&
        dist::nccl_runtime_description().rfind("NCCL ", 0) == 0)
      comm = dist::make_nccl_communicator(std::move(comm), backend.device_index());
    return comm;
  }
  return std::make_unique<PythonCommunicator>(std::move(group), backend.device_index());
}

void bind_mpi_ranks(nb::module_& m) {
  nb::class_<MpiRanks>(m, "MpiRanks",
                       "The ranks of an MPI launch (mpirun, srun): lmtrain's MPI communicator "
                       "for lmtrain.torch's steps (one per process).")
      .def(nb::init<>())
      .def_prop_ro("rank", [](const MpiRanks& r) { return r.communicator()->rank(); })
      .def_prop_ro("size", [](const MpiRanks& r) { return r.communicator()->size(); })
      .def_prop_ro("name", [](const MpiRanks& r) { return r.communicator()->name(); })
      .def(
          "all_reduce",
          [](const MpiRanks& r, nb::ndarray<double, nb::ndim<1>, nb::c_contig, nb::device::cpu> a) {
            r.communicator()->allreduce_sum(a.data(), a.shape(0));
          },
          nb::arg("values"), "Sums a float64 vector over the ranks, in place.");
  m.def("launched_with_several_ranks", &dist::launched_with_several_ranks,
        "Whether mpirun or srun started this process as one of several ranks.");
  m.def("mpi_built", &dist::mpi_built, "Whether this lmtrain was built with MPI.");
  m.def("finalize_mpi", &dist::finalize_mpi,
        "MPI_Finalize, when lmtrain initialized MPI (at the exit of an mpirun rank).");
}

}  // namespace lmtrain::python
