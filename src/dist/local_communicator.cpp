#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "forwarding_communicator.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void allreduce_sum(double*, std::size_t) override {}
  void allreduce_sum(float*, std::size_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    if (bytes > 0) std::memmove(all, mine, bytes);
  }
  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::exit(code);
  }
};

[[noreturn]] void throw_host_only(const Communicator& comm, const char* call) {
  throw Error(fmt::format(
      "{}: the {} communicator only sums host buffers; copy the data to the host and use the "
      "host collective, or train with make_nccl_communicator (GPU ranks, lmtrain built with NCCL)",
      call, comm.name()));
}

long env_count(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : 0;
}

}  // namespace

void Communicator::allreduce_sum_device(float*, std::size_t, void*) {
  throw_host_only(*this, "allreduce_sum_device");
}
void Communicator::allreduce_sum_device(double*, std::size_t, void*) {
  throw_host_only(*this, "allreduce_sum_device");
}
void Communicator::broadcast_device(void*, std::size_t, int, void*) {
  throw_host_only(*this, "broadcast_device");
}

namespace {
template <typename T>
void reduce_scatter_by_allreduce(Communicator& comm, const T* send, T* recv,
                                 std::span<const std::size_t> counts) {
  std::size_t total = 0, offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) == comm.rank()) offset = total;
    total += counts[r];
  }
  std::vector<T> all(send, send + total);
  comm.allreduce_sum(all.data(), total);
  std::copy_n(all.data() + offset, counts[static_cast<std::size_t>(comm.rank())], recv);
}
}  // namespace

void Communicator::reduce_scatter_sum(const double* send, double* recv,
                                      std::span<const std::size_t> counts) {
  reduce_scatter_by_allreduce(*this, send, recv, counts);
}
void Communicator::reduce_scatter_sum(const float* send, float* recv,
                                      std::span<const std::size_t> counts) {
  reduce_scatter_by_allreduce(*this, send, recv, counts);
}

std::vector<std::string> Communicator::allgather_strings(const std::string& mine) {
  const auto ranks = static_cast<std::size_t>(size());
  const std::uint64_t length = mine.size();
  std::vector<std::uint64_t> lengths(ranks);
  allgather(&length, sizeof length, lengths.data());
  const std::size_t width = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(width, '\0');
  std::string all(width * ranks, '\0');
  allgather(padded.data(), width, all.data());
  std::vector<std::string> strings(ranks);
  for (std::size_t r = 0; r < ranks; ++r) strings[r] = all.substr(r * width, lengths[r]);
  return strings;
}

std::optional<int> local_rank_from_environment() noexcept {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* text = std::getenv(var);
    if (text == nullptr || *text == '\0') continue;
    const std::string_view v(text);
    int rank = -1;
    const auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), rank);
    if (error == std::errc() && end == v.data() + v.size() && rank >= 0) return rank;
    return std::nullopt;  // set but not a rank: do not guess from the next variable
  }
  return std::nullopt;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown host";
  return name;
}

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

std::unique_ptr<Communicator> share_communicator(std::shared_ptr<Communicator> shared) {
  if (shared == nullptr) throw InvalidArgument("share_communicator: the communicator is null");
  return std::make_unique<ForwardingCommunicator>(std::move(shared));
}

bool launched_with_several_ranks() noexcept {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"})
    if (env_count(var) > 1) return true;
  return false;
}

#ifndef LMTRAIN_HAVE_NCCL
bool nccl_built() noexcept {
  return false;
}

std::string nccl_runtime_description() {
  return "lmtrain was built without NCCL";
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> /*host*/,
                                                     int /*cuda_device*/) {
  throw Error(
      "lmtrain was built without NCCL, so GPU ranks cannot sum device buffers; rebuild with the "
      "CUDA backend on a machine where nccl.h and libnccl are installed (the CUDA toolkit's "
      "include/ and lib64/, or set NCCL_INCLUDE_DIR and NCCL_LIBRARY), or train on CPU ranks");
}
#endif

#ifndef LMTRAIN_HAVE_MPI
bool mpi_built() noexcept {
  return false;
}

void finalize_mpi() noexcept {}

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw Error(
      "lmtrain was built without MPI; install libopenmpi-dev (scripts/install-deps.sh) and "
      "rebuild");
}

std::unique_ptr<Communicator> make_communicator_from_environment() {
  if (launched_with_several_ranks())
    throw Error(
        "this process is one of several MPI ranks, but lmtrain was built without MPI; every rank "
        "would train alone. Install libopenmpi-dev (scripts/install-deps.sh) and rebuild");
  return make_local_communicator();
}
#endif

}  // namespace lmtrain::dist
