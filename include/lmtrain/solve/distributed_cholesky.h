// The linear solver of SolverOptions::linear_solver = distributed_cholesky: (A + λD)δ = g with A
// sharded over the ranks (dist::DistributedNormalMatrix).  Every rank calls every member — the
// factorization and the triangular solves are collective — and every rank ends with the same δ,
// so the step needs no broadcast.  A is kept across λ retries (each factors A + λD afresh into
// the factor's share), and solve_again() reuses the attempt's factor for the geodesic correction.
#pragma once

#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/linear_solver.h"

namespace lmtrain {

template <typename T>
class DistributedCholeskySolver final : public LinearSolver<T> {
 public:
  // `a` must outlive the solver; the normal equations given to prepare() must be built into it.
  explicit DistributedCholeskySolver(dist::DistributedNormalMatrix<T>& a) : a_(a) {}
  LinearSolverType type() const override { return LinearSolverType::kDistributedCholesky; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override;
  bool solve(double lambda, T* delta) override;
  bool solve_again(const T* rhs, T* x) override;

  // Elements of T the solver's matrix allocates on the rank that holds the most (A's share
  // included): n parameters in blocks of nb on `ranks` ranks of `device` (its panel width).
  static std::size_t workspace_elements(std::size_t n, std::size_t nb, int ranks,
                                        DeviceKind device);

 private:
  dist::DistributedNormalMatrix<T>& a_;
  const NormalEquations<T>* ne_ = nullptr;
  const T* d_ = nullptr;
  bool factored_ = false;
};

}  // namespace lmtrain
