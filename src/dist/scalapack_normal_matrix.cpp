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
      : DistributedNormalMatrix<T>(
            BlockCyclicLayout{n, nb, ProcessGrid::for_ranks(comm.size(), comm.rank())}),
        comm_(comm),
        backend_(backend) {
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
    panel_columns_ = DistributedNormalMatrix<T>::panel_block_columns(l, DeviceKind::kCpu);
    const std::size_t width = std::min(n, nb * panel_columns_);
    a_ = backend.allocate(l.local_elements());
    factor_ = backend.allocate(l.local_elements());
    panel_ = backend.allocate(width * n);
    send_ = backend.allocate(width * n);
    recv_ = backend.allocate(std::max<std::size_t>(nb * l.local_rows(), 1));
    rhs_ = backend.allocate(l.local_ld());
    vector_ = backend.allocate(n);
    counts_.resize(static_cast<std::size_t>(comm.size()));
  }
  ~ScalapackNormalMatrix() override {
    Cblacs_gridexit(context_);
    Cfree_blacs_system_handle(blacs_);
  }
  ScalapackNormalMatrix(const ScalapackNormalMatrix&) = delete;
  ScalapackNormalMatrix& operator=(const ScalapackNormalMatrix&) = delete;

  std::string describe() const override {
    const BlockCyclicLayout& l = this->layout_;
    return fmt::format("ScaLAPACK p{}potrf/p{}potrs on a {} process grid, {}×{} blocks",
                       sizeof(T) == 8 ? 'd' : 's', sizeof(T) == 8 ? 'd' : 's', l.grid.describe(),
                       l.nb, l.nb);
  }

  std::size_t begin(std::size_t local_passes) override {
    backend_.fill(a_.data(), this->layout_.local_elements(), T(0));
    std::vector<std::uint64_t> all(counts_.size());
    const std::uint64_t mine = local_passes;
    comm_.allgather(&mine, sizeof mine, all.data());
    return static_cast<std::size_t>(*std::max_element(all.begin(), all.end()));
  }

  void accumulate(const T* j, std::size_t m, std::size_t ld) override {
    const BlockCyclicLayout& l = this->layout_;
    const std::size_t width = l.nb * panel_columns_;
    for (std::size_t c0 = 0; c0 < l.n; c0 += width) {
      const std::size_t c1 = std::min(l.n, c0 + width), w = c1 - c0;
      // Panel P (w × c1, row-major) = J[:, c0:c1]ᵀ·J[:, 0:c1]: row jj of P is column c0 + jj of
      // A's upper part, its rows 0 … c1 − 1 contiguous.
      if (m > 0)
        backend_.gemm(Trans::kYes, Trans::kNo, w, c1, m, T(1), j + c0, ld, j, ld, T(0),
                      panel_.data(), c1);
      else
        backend_.fill(panel_.data(), w * c1, T(0));
      pack(c0, c1);
      comm_.reduce_scatter_sum(send_.data(), recv_.data(), counts_);
      unpack(c0, c1);
    }
  }

  void diagonal(T* out) override {
    const BlockCyclicLayout& l = this->layout_;
    T* v = vector_.data();
    std::fill_n(v, l.n, T(0));
    for (std::size_t i = 0; i < l.n; ++i)
      if (owns(i, i)) v[i] = a_.data()[l.local_row(i) + l.local_col(i) * l.local_ld()];
    comm_.allreduce_sum(v, l.n);
    backend_.copy(v, out, l.n);
  }

  int factor(double lambda, const T* d, double shift) override {
    const BlockCyclicLayout& l = this->layout_;
    backend_.copy(a_.data(), factor_.data(), l.local_elements());
    for (std::size_t i = 0; i < l.n; ++i)
      if (owns(i, i))
        factor_.data()[l.local_row(i) + l.local_col(i) * l.local_ld()] +=
            static_cast<T>(lambda * (d != nullptr ? static_cast<double>(d[i]) : 1.0) + shift);
    const int info = potrf(static_cast<int>(l.n), factor_.data(), desc_a_);
    // ScaLAPACK returns INFO on every process; the ranks agree on it all the same, so that no
    // rank can go on to a solve the others skip.
    std::vector<int> all(counts_.size());
    comm_.allgather(&info, sizeof info, all.data());
    if (std::any_of(all.begin(), all.end(), [](int i) { return i < 0; }))
      throw Error(fmt::format("ScaLAPACK p?potrf rejected argument {} on some rank",
                              -*std::min_element(all.begin(), all.end())));
    return *std::max_element(all.begin(), all.end());
  }

  void solve(const T* rhs, T* x) override {
    const BlockCyclicLayout& l = this->layout_;
    const std::size_t rows = l.local_rows();
    // b lives in process column 0: its local rows are the rank's rows of A.
    if (l.grid.col == 0)
      for (std::size_t li = 0; li < rows; ++li) rhs_.data()[li] = rhs[global_row(li)];
    const int info = potrs(static_cast<int>(l.n), factor_.data(), desc_a_, rhs_.data(), desc_b_);
    if (info != 0) throw Error(fmt::format("ScaLAPACK p?potrs failed (info {})", info));
    T* v = vector_.data();
    std::fill_n(v, l.n, T(0));
    if (l.grid.col == 0)
      for (std::size_t li = 0; li < rows; ++li) v[global_row(li)] = rhs_.data()[li];
    comm_.allreduce_sum(v, l.n);  // one owner per entry: the sum is exact on every rank
    backend_.copy(v, x, l.n);
  }

 private:
  bool owns(std::size_t i, std::size_t j) const {
    const BlockCyclicLayout& l = this->layout_;
    return l.row_owner(i) == l.grid.row && l.col_owner(j) == l.grid.col;
  }
  std::size_t global_row(std::size_t li) const {
    const BlockCyclicLayout& l = this->layout_;
    const auto rows = static_cast<std::size_t>(l.grid.rows);
    return ((li / l.nb) * rows + static_cast<std::size_t>(l.grid.row)) * l.nb + li % l.nb;
  }
  // The first column of the panel's block column [c0, c1) that process column pc owns, or c1
  // when it owns none there: a panel spans at most Pc block columns, each of another owner.
  std::size_t owned_block_column(std::size_t c0, std::size_t c1, int pc) const {
    const BlockCyclicLayout& l = this->layout_;
    for (std::size_t j0 = c0; j0 < c1; j0 += l.nb)
      if (l.col_owner(j0) == pc) return j0;
    return c1;
  }
  // The panel's columns [c0, c1) in rank order: for rank (pr, pc) its block column of the panel
  // (none: nothing), each column's rows of process row pr below c1, in local order (column-major,
  // as stored).
  void pack(std::size_t c0, std::size_t c1) {
    const BlockCyclicLayout& l = this->layout_;
    const T* panel = panel_.data();
    T* out = send_.data();
    std::size_t pos = 0;
    for (int pr = 0; pr < l.grid.rows; ++pr)
      for (int pc = 0; pc < l.grid.cols; ++pc) {
        const std::size_t start = pos;
        const std::size_t j0 = owned_block_column(c0, c1, pc);
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
  void unpack(std::size_t c0, std::size_t c1) {
    const BlockCyclicLayout& l = this->layout_;
    const std::size_t j0 = owned_block_column(c0, c1, l.grid.col);
    const std::size_t rows = BlockCyclicLayout::local_count(c1, l.nb, l.grid.row, l.grid.rows);
    const T* in = recv_.data();
    for (std::size_t col = j0; col < std::min(c1, j0 + l.nb); ++col) {
      T* column = a_.data() + l.local_col(col) * l.local_ld();
      for (std::size_t li = 0; li < rows; ++li) column[li] += *in++;
    }
  }

  Communicator& comm_;
  LinearAlgebra<T>& backend_;
  int blacs_ = -1, context_ = -1;
  int desc_a_[9] = {}, desc_b_[9] = {};
  DeviceBuffer<T> a_, factor_, panel_, send_, recv_, rhs_, vector_;
  std::vector<std::size_t> counts_;
  std::size_t panel_columns_ = 1;  // block columns per reduce-scatter (panel_block_columns)
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
