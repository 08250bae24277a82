// A distributed normal matrix on CPU ranks: MPI reduce-scatters the panels, ScaLAPACK (Debian's
// libscalapack-openmpi, over BLACS on the MPI communicator's ranks) factors and solves.  Debian
// ships no ScaLAPACK header, so the Fortran entry points are declared here as the reference
// ScaLAPACK 2.2 defines them (LP64 integers; a character argument's hidden length as size_t,
// gfortran's convention).
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/distributed_normal_matrix.h"

extern "C" {
int Csys2blacs_handle(MPI_Comm comm);
void Cfree_blacs_system_handle(int handle);
void Cblacs_gridinit(int* context, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int context);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* context, const int* lld, int* info);
void pdpotrf_(const char* uplo, const int* n, double* a, const int* ia, const int* ja,
              const int* desca, int* info, std::size_t uplo_length);
void pspotrf_(const char* uplo, const int* n, float* a, const int* ia, const int* ja,
              const int* desca, int* info, std::size_t uplo_length);
void pdpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* ia,
              const int* ja, const int* desca, double* b, const int* ib, const int* jb,
              const int* descb, int* info, std::size_t uplo_length);
void pspotrs_(const char* uplo, const int* n, const int* nrhs, const float* a, const int* ia,
              const int* ja, const int* desca, float* b, const int* ib, const int* jb,
              const int* descb, int* info, std::size_t uplo_length);
}

namespace lmtrain::dist {
namespace {

int potrf(int n, double* a, const int* desc) {
  const int one = 1;
  int info = 0;
  pdpotrf_("U", &n, a, &one, &one, desc, &info, 1);
  return info;
}
int potrf(int n, float* a, const int* desc) {
  const int one = 1;
  int info = 0;
  pspotrf_("U", &n, a, &one, &one, desc, &info, 1);
  return info;
}
int potrs(int n, const double* a, const int* desc_a, double* b, const int* desc_b) {
  const int one = 1;
  int info = 0;
  pdpotrs_("U", &n, &one, a, &one, &one, desc_a, b, &one, &one, desc_b, &info, 1);
  return info;
}
int potrs(int n, const float* a, const int* desc_a, float* b, const int* desc_b) {
  const int one = 1;
  int info = 0;
  pspotrs_("U", &n, &one, a, &one, &one, desc_a, b, &one, &one, desc_b, &info, 1);
  return info;
}

int as_int(std::size_t v, const char* what) {
  if (v > static_cast<std::size_t>(INT32_MAX))
    throw InvalidArgument(fmt::format(
        "distributed_cholesky: {} = {} exceeds ScaLAPACK's 32-bit integers (LP64 build)", what, v));
  return static_cast<int>(v);
}

template <typename T>
class ScalapackNormalMatrix final : public DistributedNormalMatrix<T> {
 public:
  ScalapackNormalMatrix(Communicator& comm, LinearAlgebra<T>& backend, std::size_t n,
                        std::size_t nb)
      : DistributedNormalMatrix<T>(comm, backend, n, nb) {
    const BlockCyclicLayout& l = this->layout_;
    blacs_ = Csys2blacs_handle(*static_cast<const MPI_Comm*>(comm.mpi_comm()));
    context_ = blacs_;
    Cblacs_gridinit(&context_, "Row", l.grid.rows, l.grid.cols);
    int rows = 0, cols = 0, row = -1, col = -1;
    Cblacs_gridinfo(context_, &rows, &cols, &row, &col);
    if (rows != l.grid.rows || cols != l.grid.cols || row != l.grid.row || col != l.grid.col)
      throw Error(fmt::format(
          "BLACS placed rank {} at ({}, {}) of a {}×{} grid, lmtrain expected ({}, {}) of {}",
          comm.rank(), row, col, rows, cols, l.grid.row, l.grid.col, l.grid.describe()));
    const int ni = as_int(n, "n"), nbi = as_int(nb, "the block size"), zero = 0, one = 1;
    const int lld = as_int(l.local_ld(), "the local leading dimension");
    int info = 0;
    descinit_(desc_a_, &ni, &ni, &nbi, &nbi, &zero, &zero, &context_, &lld, &info);
    if (info == 0) descinit_(desc_b_, &ni, &one, &nbi, &nbi, &zero, &zero, &context_, &lld, &info);
    if (info != 0) throw Error(fmt::format("ScaLAPACK descinit failed (info {})", info));
    send_ = backend.allocate(this->panel_.size());  // the panel packed by rank
    recv_ = backend.allocate(std::max<std::size_t>(nb * l.local_rows(), 1));
    counts_.resize(static_cast<std::size_t>(comm.size()));
  }
  ~ScalapackNormalMatrix() override {
    Cblacs_gridexit(context_);
    Cfree_blacs_system_handle(blacs_);
  }

  std::string describe() const override {
    const BlockCyclicLayout& l = this->layout_;
    return fmt::format("ScaLAPACK p{}potrf/p{}potrs on a {} process grid, {}×{} blocks",
                       sizeof(T) == 8 ? 'd' : 's', sizeof(T) == 8 ? 'd' : 's', l.grid.describe(),
                       l.nb, l.nb);
  }

 private:
  const T* reduce_scatter_panel(std::size_t c0, std::size_t c1) override {
    pack(c0, c1);
    this->comm_.reduce_scatter_sum(send_.data(), recv_.data(), counts_);
    return recv_.data();
  }
  void sum_vector() override { this->comm_.allreduce_sum(this->vector_.data(), this->layout_.n); }
  void shift_diagonal(double lambda, const T* d, double shift) override {
    for (std::size_t i = 0; i < this->layout_.n; ++i)
      if (this->owns(i, i))
        this->factor_.data()[this->local_index(i, i)] +=
            static_cast<T>(lambda * (d != nullptr ? static_cast<double>(d[i]) : 1.0) + shift);
  }
  int potrf() override {
    return dist::potrf(static_cast<int>(this->layout_.n), this->factor_.data(), desc_a_);
  }
  const char* potrf_name() const override { return "ScaLAPACK p?potrf"; }
  void potrs() override {
    const int info = dist::potrs(static_cast<int>(this->layout_.n), this->factor_.data(), desc_a_,
                                 this->rhs_.data(), desc_b_);
    if (info != 0) throw Error(fmt::format("ScaLAPACK p?potrs failed (info {})", info));
  }

  // The panel's columns [c0, c1) in rank order: for rank (pr, pc) its block column of the panel
  // (none: nothing), each column's rows of process row pr below c1, in local order (column-major,
  // as stored).
  void pack(std::size_t c0, std::size_t c1) {
    const BlockCyclicLayout& l = this->layout_;
    const T* panel = this->panel_.data();
    T* out = send_.data();
    std::size_t pos = 0;
    for (int pr = 0; pr < l.grid.rows; ++pr)
      for (int pc = 0; pc < l.grid.cols; ++pc) {
        const std::size_t start = pos;
        const std::size_t j0 = this->owned_block_column(c0, c1, pc);
        for (std::size_t col = j0; col < std::min(c1, j0 + l.nb); ++col) {
          const T* column = panel + (col - c0) * c1;
          for (std::size_t i0 = static_cast<std::size_t>(pr) * l.nb; i0 < c1;
               i0 += l.nb * static_cast<std::size_t>(l.grid.rows)) {
            const std::size_t count = std::min(l.nb, c1 - i0);
            std::copy_n(column + i0, count, out + pos);
            pos += count;
          }
        }
        counts_[static_cast<std::size_t>(l.grid.rank_of(pr, pc))] = pos - start;
      }
  }

  int blacs_ = -1, context_ = -1;
  int desc_a_[9] = {}, desc_b_[9] = {};
  DeviceBuffer<T> send_, recv_;
  std::vector<std::size_t> counts_;
};

}  // namespace

template <typename T>
std::unique_ptr<DistributedNormalMatrix<T>> make_scalapack_normal_matrix(Communicator& comm,
                                                                         LinearAlgebra<T>& backend,
                                                                         std::size_t n,
                                                                         std::size_t nb) {
  return std::make_unique<ScalapackNormalMatrix<T>>(comm, backend, n, nb);
}

template std::unique_ptr<DistributedNormalMatrix<float>> make_scalapack_normal_matrix(
    Communicator&, LinearAlgebra<float>&, std::size_t, std::size_t);
template std::unique_ptr<DistributedNormalMatrix<double>> make_scalapack_normal_matrix(
    Communicator&, LinearAlgebra<double>&, std::size_t, std::size_t);

}  // namespace lmtrain::dist
