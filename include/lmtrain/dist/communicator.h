// Data-parallel training's control and data plane (DESIGN.md §6).  One rank per device; each
// rank builds A, g and the loss of its shard of every batch, and the ranks sum them here.  J
// never leaves the rank that built it: only A (its packed upper triangle), g, scalars and, with
// the matrix-free solver, n-vectors cross.
//
// Implementations: local (one rank, no-ops), MPI (OpenMPI; CPU ranks).  The launch environment
// picks one: a process started by mpirun/srun with more than one rank gets MPI when lmtrain was
// built with it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace lmtrain::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "local" or "mpi (OpenMPI 4.1.4, 3 ranks)".
  virtual std::string name() const = 0;
  bool is_root() const { return rank() == 0; }

  // In-place element-wise sums over all ranks of host buffers; every rank gets the same bits.
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  // Copies `bytes` from `root` to every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Ends every rank of the job with `code` after printing `message` on this rank's stderr
  // (MPI_Abort): an error on one rank must not leave the others waiting in a collective.
  [[noreturn]] virtual void abort(int code, const std::string& message) = 0;

  double sum(double value) {
    allreduce_sum(&value, 1);
    return value;
  }
};

std::unique_ptr<Communicator> make_local_communicator();

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

}  // namespace lmtrain::dist
