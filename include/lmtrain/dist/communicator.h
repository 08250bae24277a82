// Data-parallel training's control and data plane (DESIGN.md §6).  One rank per device; each
// rank builds A, g and the loss of its shard of every batch, and the ranks sum them here.  J
// never leaves the rank that built it: only A (its packed upper triangle), g, scalars and, with
// the matrix-free solver, n-vectors cross.
//
// Implementations: local (one rank, no-ops), MPI (OpenMPI; CPU ranks), NCCL (GPU ranks; a
// decorator over local or MPI that adds collectives on device buffers).  The launch environment
// picks local or MPI: a process started by mpirun/srun with more than one rank gets MPI when
// lmtrain was built with it; make_nccl_communicator wraps the result for a GPU rank.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lmtrain::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks on the same node (0 for the local communicator): what
  // picks its GPU (lmtrain/backend/device.h).  MPI asks MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)
  // and falls back to local_rank_from_environment() if MPI cannot say.
  virtual int local_rank() const { return 0; }
  // "local", "mpi (OpenMPI 4.1.4, 3 ranks)", "nccl 2.28.9 over mpi (OpenMPI 4.1.4, 3 ranks)" or
  // "nccl 2.28.9 (1 rank)".
  virtual std::string name() const = 0;
  bool is_root() const { return rank() == 0; }

  // In-place element-wise sums over all ranks of host buffers; every rank gets the same bits.
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  // Copies `bytes` from `root` to every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Every rank contributes `bytes` at `mine`; afterwards `all` (size() · bytes) holds rank r's
  // contribution at offset r · bytes, on every rank.
  virtual void allgather(const void* mine, std::size_t bytes, void* all) = 0;
  // Element-wise sums over all ranks of host buffers, scattered: `send` holds Σ counts values,
  // rank r's part (counts[r] values) at offset counts[0] + … + counts[r−1]; `recv` gets this rank's
  // part summed over the ranks.  A distributed normal matrix's panels reach their owners this
  // way.  By default an all-reduce of the whole buffer (MPI overrides it with MPI_Reduce_scatter).
  virtual void reduce_scatter_sum(const double* send, double* recv,
                                  std::span<const std::size_t> counts);
  virtual void reduce_scatter_sum(const float* send, float* recv,
                                  std::span<const std::size_t> counts);
  // Collectives on device buffers (NCCL).  Host-only communicators (local, MPI) return false and
  // throw lmtrain::Error from the *_device functions; the caller then copies to the host and
  // uses the host collectives above.
  virtual bool supports_device_buffers() const { return false; }
  // In-place element-wise sums over all ranks of `n` elements at `device_data`, a buffer on this
  // rank's CUDA device; every rank gets the same bits.  Enqueued on `cuda_stream` (a
  // cudaStream_t), so it runs after the work already queued there.  The caller synchronizes the
  // stream when it needs the result on the host.  The NCCL communicator returns only once the
  // collective has completed: it waits by polling the stream and NCCL's error state, so a dead
  // peer ends the job instead of hanging a later cudaStreamSynchronize.
  virtual void allreduce_sum_device(float* device_data, std::size_t n, void* cuda_stream);
  virtual void allreduce_sum_device(double* device_data, std::size_t n, void* cuda_stream);
  // Copies `bytes` at `device_data` on `root` to every rank, in place, enqueued on `cuda_stream`.
  virtual void broadcast_device(void* device_data, std::size_t bytes, int root, void* cuda_stream);

  // The MPI_Comm (as a pointer to it) of an MPI communicator, or of the MPI communicator a NCCL
  // one wraps; null otherwise.  For libraries that run their own MPI collectives on the same
  // ranks (ScaLAPACK's BLACS).
  virtual const void* mpi_comm() const { return nullptr; }
  // The ncclComm_t of a NCCL communicator (null otherwise), for cuSOLVERMp and cuBLASMp.
  virtual void* nccl_comm() const { return nullptr; }

  // Ends every rank of the job with `code` after printing `message` on this rank's stderr
  // (MPI_Abort): an error on one rank must not leave the others waiting in a collective.
  [[noreturn]] virtual void abort(int code, const std::string& message) = 0;

  double sum(double value) {
    allreduce_sum(&value, 1);
    return value;
  }
  // One string per rank, in rank order, on every rank (two allgathers: lengths, then the
  // strings padded to the longest).  Collective.
  std::vector<std::string> allgather_strings(const std::string& mine);
};

std::unique_ptr<Communicator> make_local_communicator();

// A communicator that forwards every call to `shared`, which it keeps alive: for owners that
// each want a Communicator of their own over one process-wide one (lmtrain.torch's steps under
// mpirun share the MPI communicator, which finalizes MPI when it is destroyed).
std::unique_ptr<Communicator> share_communicator(std::shared_ptr<Communicator> shared);

// True when lmtrain was built with NCCL (and the CUDA backend).  NCCL itself (libnccl.so.2) is
// loaded when the first NCCL communicator is made, so runs without one need no NCCL installed.
bool nccl_built() noexcept;
// "NCCL 2.28.9 (/path/libnccl.so.2)": the library make_nccl_communicator loads (it is loaded by
// this call), or why none can be ("not loadable: ..." / "lmtrain was built without NCCL").
// Looks at $LMTRAIN_NCCL_LIBRARY, then libnccl.so.2 on the loader's path, then the library
// lmtrain was built against.  Never throws.
std::string nccl_runtime_description();
// A communicator for a GPU rank: the same ranks as `host` (local or MPI), with NCCL for the
// device-buffer collectives on `cuda_device` (an index among the visible CUDA devices).  `host`
// keeps the host collectives, bootstraps NCCL (rank 0's ncclUniqueId is broadcast over it) and
// ends the job on a failure.  Collective; every rank of `host` must call it.
//
// NCCL runs non-blocking (ncclConfig_t::blocking = 0): each wait polls ncclCommGetAsyncError
// alongside the stream, so a rank whose peer died or whose collective does not complete within
// LMTRAIN_NCCL_TIMEOUT_S seconds (default 300) aborts the NCCL communicator and then the job
// through host->abort with a message naming the rank, the call and NCCL's reason.  With one
// rank such a failure throws lmtrain::Error instead (no other rank waits).
//
// Throws lmtrain::Error when lmtrain was built without NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     int cuda_device);

// The node-local rank the launcher exported: OMPI_COMM_WORLD_LOCAL_RANK (OpenMPI's mpirun),
// SLURM_LOCALID (srun), MPI_LOCALRANKID (MPICH's Hydra), the first that is set; empty when none
// is or its value is not a non-negative integer.  For processes without an MPI communicator
// (the benchmark drivers under mpirun) and as MPI's fallback.
std::optional<int> local_rank_from_environment() noexcept;

// This node's host name (gethostname), or "unknown host": where a rank ran, for reports.
std::string host_name();

// True when lmtrain was built with MPI.
bool mpi_built() noexcept;
// True when the environment says this process is one of several ranks of an MPI launch
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE or SLURM_NTASKS above 1).
bool launched_with_several_ranks() noexcept;
// MPI when launched with several ranks and built with MPI; local otherwise.  Throws
// lmtrain::Error when launched with several ranks but built without MPI (every rank would train
// the whole problem alone).  Initializes MPI on first use; it is finalized when the returned
// communicator is destroyed.
std::unique_ptr<Communicator> make_communicator_from_environment();
// The MPI communicator of every rank of the launch, even a single one (make_communicator_from_
// environment gives one rank the local communicator): for libraries that need MPI on one rank
// too (ScaLAPACK's BLACS), and for tests under mpirun -np 1.  Throws lmtrain::Error when lmtrain
// was built without MPI.
std::unique_ptr<Communicator> make_mpi_communicator();
// MPI_Finalize now, when lmtrain initialized MPI and it is not finalized yet; nothing otherwise.
// For a Python process (lmtrain.torch under mpirun), whose objects holding the communicator may
// outlive the interpreter's last chance to finalize, which mpirun reports as an error.  No MPI
// call may follow.
void finalize_mpi() noexcept;

}  // namespace lmtrain::dist
