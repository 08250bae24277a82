// The MPI communicator (OpenMPI from Debian).  Collectives run on MPI_COMM_WORLD; MPI is
// initialized here (MPI_THREAD_FUNNELED: only the thread that trains talks to MPI) and finalized
// with the last communicator.
#include <fmt/format.h>
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <limits>
#include <span>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {
namespace {

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(
      fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(length))));
}

// MPI counts are ints: large buffers go in chunks.
template <typename T>
void allreduce_chunks(T* data, std::size_t n, MPI_Datatype type) {
  constexpr std::size_t kChunk = std::numeric_limits<int>::max() / 2;
  for (std::size_t first = 0; first < n; first += kChunk) {
    const auto count = static_cast<int>(std::min(kChunk, n - first));
    check(MPI_Allreduce(MPI_IN_PLACE, data + first, count, type, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
}

// Whether lmtrain called MPI_Init (and so may finalize MPI), rather than another library.
std::atomic<bool> g_initialized_mpi{false};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
      g_initialized_mpi = true;
    }
    // Errors come back as codes (turned into exceptions above) rather than aborting silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    local_rank_ = node_local_rank(rank_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string v(version, static_cast<std::size_t>(length));
    library_ = v.substr(0, v.find(','));
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string name() const override { return fmt::format("mpi ({}, {} ranks)", library_, size_); }
  void allreduce_sum(double* data, std::size_t n) override {
    allreduce_chunks(data, n, MPI_DOUBLE);
  }
  void allreduce_sum(float* data, std::size_t n) override { allreduce_chunks(data, n, MPI_FLOAT); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    constexpr std::size_t kChunk = std::numeric_limits<int>::max() / 2;
    for (std::size_t first = 0; first < bytes; first += kChunk) {
      const auto count = static_cast<int>(std::min(kChunk, bytes - first));
      check(MPI_Bcast(p + first, count, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
  }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw InvalidArgument(fmt::format(
          "Communicator::allgather: {} bytes per rank exceed MPI's int count; gather less", bytes));
    check(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes),
                        MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather");
  }
  void reduce_scatter_sum(const double* send, double* recv,
                          std::span<const std::size_t> counts) override {
    reduce_scatter(send, recv, counts, MPI_DOUBLE);
  }
  void reduce_scatter_sum(const float* send, float* recv,
                          std::span<const std::size_t> counts) override {
    reduce_scatter(send, recv, counts, MPI_FLOAT);
  }
  const void* mpi_comm() const override { return &world_; }
  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  template <typename T>
  void reduce_scatter(const T* send, T* recv, std::span<const std::size_t> counts,
                      MPI_Datatype type) {
    std::vector<int> ints(counts.size());
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw InvalidArgument(fmt::format(
            "Communicator::reduce_scatter_sum: {} values for rank {} exceed MPI's int count; use "
            "a smaller SolverOptions::distributed_block_size",
            counts[r], r));
      ints[r] = static_cast<int>(counts[r]);
      total += counts[r];
    }
    if (ints.size() != static_cast<std::size_t>(size_))
      throw InvalidArgument("Communicator::reduce_scatter_sum: one count per rank is needed");
    // MPI wants a send buffer even when every count is 0.
    const T none{};
    check(MPI_Reduce_scatter(total > 0 ? send : &none, recv, ints.data(), type, MPI_SUM,
                             MPI_COMM_WORLD),
          "MPI_Reduce_scatter");
  }

  // The rank among those that share this node's memory (MPI-3), else what the launcher says.
  static int node_local_rank(int world_rank) {
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL,
                            &node) == MPI_SUCCESS &&
        node != MPI_COMM_NULL) {
      int local = -1;
      const int status = MPI_Comm_rank(node, &local);
      MPI_Comm_free(&node);
      if (status == MPI_SUCCESS && local >= 0) return local;
    }
    return local_rank_from_environment().value_or(0);
  }

  MPI_Comm world_ = MPI_COMM_WORLD;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  bool owns_mpi_ = false;
  std::string library_;
};

}  // namespace

bool mpi_built() noexcept {
  return true;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

void finalize_mpi() noexcept {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (g_initialized_mpi && initialized && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> make_communicator_from_environment() {
  if (launched_with_several_ranks()) return std::make_unique<MpiCommunicator>();
  return make_local_communicator();
}

}  // namespace lmtrain::dist
