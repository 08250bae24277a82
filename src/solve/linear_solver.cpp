#include "lmtrain/solve/linear_solver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/solve/recorded_work.h"

namespace lmtrain {
namespace {

// (A + λD) = LLᵀ, then two triangular solves.  Refactors for every λ: n³/3 flops a retry.
// With SolverOptions::cuda_graphs each attempt of solve_into — A + λD copied, factored, solved —
// is RecordedWork (recorded_work.h): λ is written to a device double first and read there
// (add_diagonal_from: the host λ's bits), so one recording serves every λ; it is recorded again
// when the buffers it uses change (another NormalEquations, D, δ or status slot) or the backend
// moved a workspace it uses, and ignored, with why, where the device refuses to record it.
template <typename T>
class CholeskySolver final : public LinearSolver<T> {
 public:
  CholeskySolver(LinearAlgebra<T>& backend, std::size_t n, bool graphs)
      : backend_(backend), n_(n), factor_(backend.allocate(n * n)) {
    if (!graphs) return;
    if (const std::string why = backend_.why_not_recordable(); !why.empty()) {
      report_ = "SolverOptions::cuda_graphs: ignored, " + why;
      return;
    }
    lambda_ = DeviceBuffer<double>(backend_.memory(), 1);
    attempts_ = std::make_unique<RecordedWork>(
        backend_, fmt::format("each attempt's factorization and solve (n = {})", n_));
  }
  LinearSolverType type() const override { return LinearSolverType::kCholesky; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override {
    ne_ = &ne;
    d_ = d;
    return true;
  }
  bool solve(double lambda, T* delta) override {
    damp(lambda);
    if (backend_.potrf(n_, factor_.data()) != 0) return false;
    return solve_again(ne_->g.data(), delta);
  }
  // The triangular solves run after a failed factorization too (on its partial factor): the
  // caller reads the status afterwards and discards δ.
  typename LinearSolver<T>::Verdict solve_into(double lambda, T* delta, double* status) override {
    if (!attempts_ || !attempts_->recording()) {
      damp(lambda);
      backend_.potrf_into(n_, factor_.data(), status);
      solve_again(ne_->g.data(), delta);
      return LinearSolver<T>::Verdict::kOnDevice;
    }
    backend_.write_scalars(&lambda, lambda_.data(), 1);
    attempts_->run({address_key(ne_->a.data()), address_key(d_), address_key(ne_->g.data()),
                    address_key(delta), address_key(status)},
                   [&] {
                     backend_.copy_upper(n_, ne_->a.data(), factor_.data());
                     backend_.add_diagonal_from(n_, factor_.data(), lambda_.data(), d_);
                     backend_.potrf_into(n_, factor_.data(), status);
                     solve_again(ne_->g.data(), delta);
                   });
    return LinearSolver<T>::Verdict::kOnDevice;
  }
  bool solve_again(const T* rhs, T* x) override {
    backend_.copy(rhs, x, n_);
    backend_.potrs(n_, factor_.data(), x);
    return true;
  }
  std::string report() const override { return attempts_ ? attempts_->report() : report_; }

 private:
  // factor_ = A + λD, its upper triangle (the one potrf reads).
  void damp(double lambda) {
    backend_.copy_upper(n_, ne_->a.data(), factor_.data());
    backend_.add_diagonal(n_, factor_.data(), static_cast<T>(lambda), d_);
  }

  LinearAlgebra<T>& backend_;
  std::size_t n_;
  DeviceBuffer<T> factor_;
  const NormalEquations<T>* ne_ = nullptr;
  const T* d_ = nullptr;
  std::string report_;                      // why SolverOptions::cuda_graphs is ignored
  DeviceBuffer<double> lambda_;             // λ of the recorded attempt, on the device
  std::unique_ptr<RecordedWork> attempts_;  // SolverOptions::cuda_graphs (null: off)
};

// With S = D^{-½}: SAS = QΛQᵀ once per step; δ = S Q (Λ + λI)⁻¹ Qᵀ S g for every λ, O(n²).
template <typename T>
class EigenSolver final : public LinearSolver<T> {
 public:
  EigenSolver(LinearAlgebra<T>& backend, std::size_t n)
      : backend_(backend),
        n_(n),
        q_(backend.allocate(n * n)),
        w_(backend.allocate(n)),
        c_(backend.allocate(n)),
        s_(backend.allocate(n)),
        ones_(backend.allocate(n)),
        tmp_(backend.allocate(n)),
        shifted_(backend.allocate(n)) {
    backend_.fill(ones_.data(), n_, T(1));
  }
  LinearSolverType type() const override { return LinearSolverType::kEigen; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override {
    scaled_ = d != nullptr;
    backend_.copy(ne.a.data(), q_.data(), n_ * n_);
    if (scaled_) {
      backend_.inverse_sqrt(n_, d, s_.data());  // s = D^{-½}
      backend_.scale_symmetric(n_, q_.data(), s_.data());
    }
    if (backend_.syevd(n_, q_.data(), w_.data()) != 0) return ready_ = false;
    T w_min{};
    backend_.copy_to_host(w_.data(), &w_min, 1);  // eigenvalues ascend: one scalar
    w_min_ = static_cast<double>(w_min);
    // c = Qᵀ S g in the eigenbasis (rows of q_ are eigenvectors).
    if (scaled_) {
      backend_.scale_elementwise(n_, ne.g.data(), s_.data(), false, tmp_.data());
    } else {
      backend_.copy(ne.g.data(), tmp_.data(), n_);
    }
    backend_.gemv(Trans::kNo, n_, n_, T(1), q_.data(), n_, tmp_.data(), T(0), c_.data());
    return ready_ = true;
  }
  bool solve(double lambda, T* delta) override {
    if (!ready_ || !(w_min_ + lambda > 0)) return false;
    backend_.add_scaled(n_, w_.data(), static_cast<T>(lambda), ones_.data(), shifted_.data());
    backend_.scale_elementwise(n_, c_.data(), shifted_.data(), /*divide=*/true, tmp_.data());
    backend_.gemv(Trans::kYes, n_, n_, T(1), q_.data(), n_, tmp_.data(), T(0), delta);
    if (scaled_) backend_.scale_elementwise(n_, delta, s_.data(), false, delta);
    return true;
  }
  // The same with c = QᵀS·rhs: two more products with Q, O(n²).
  bool solve_again(const T* rhs, T* x) override {
    if (scaled_) {
      backend_.scale_elementwise(n_, rhs, s_.data(), false, x);
    } else {
      backend_.copy(rhs, x, n_);
    }
    backend_.gemv(Trans::kNo, n_, n_, T(1), q_.data(), n_, x, T(0), tmp_.data());
    backend_.scale_elementwise(n_, tmp_.data(), shifted_.data(), /*divide=*/true, tmp_.data());
    backend_.gemv(Trans::kYes, n_, n_, T(1), q_.data(), n_, tmp_.data(), T(0), x);
    if (scaled_) backend_.scale_elementwise(n_, x, s_.data(), false, x);
    return true;
  }

 private:
  LinearAlgebra<T>& backend_;
  std::size_t n_;
  DeviceBuffer<T> q_, w_, c_, s_, ones_, tmp_;
  DeviceBuffer<T> shifted_;  // Λ + λ of the last solve
  bool scaled_ = false;
  bool ready_ = false;
  double w_min_ = 0;
};

// δ = Jᵀu with (JJᵀ + λI)u = r: an m × m system, cheaper than n × n when m < n.
template <typename T>
class DualSolver final : public LinearSolver<T> {
 public:
  DualSolver(LinearAlgebra<T>& backend, std::size_t max_residuals)
      : backend_(backend),
        gram_(backend.allocate(max_residuals * max_residuals)),
        factor_(backend.allocate(max_residuals * max_residuals)),
        u_(backend.allocate(max_residuals)) {}
  LinearSolverType type() const override { return LinearSolverType::kDual; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override {
    if (!ne.jacobian_stored)
      throw InvalidArgument("dual solver: the normal equations were built without J stored");
    if (d != nullptr)
      throw InvalidArgument("dual solver: only D = I is supported (damping_matrix = identity)");
    if (ne.shift != 0)
      throw InvalidArgument(
          "dual solver: weight decay moves g out of J's row space; use cholesky or cg");
    ne_ = &ne;
    backend_.syrk_aat(ne.m, ne.n, T(1), ne.j.data(), ne.n, T(0), gram_.data());
    return true;
  }
  bool solve(double lambda, T* delta) override {
    damp(lambda);
    if (backend_.potrf(ne_->m, factor_.data()) != 0) return false;
    dual_to_primal(delta);
    return true;
  }
  // As CholeskySolver's: the solves run after a failed factorization too, δ then discarded.
  typename LinearSolver<T>::Verdict solve_into(double lambda, T* delta, double* status) override {
    damp(lambda);
    backend_.potrf_into(ne_->m, factor_.data(), status);
    dual_to_primal(delta);
    return LinearSolver<T>::Verdict::kOnDevice;
  }

 private:
  // factor_ = JJᵀ + λI.
  void damp(double lambda) {
    const std::size_t m = ne_->m;
    backend_.copy(gram_.data(), factor_.data(), m * m);
    backend_.add_diagonal(m, factor_.data(), static_cast<T>(lambda), nullptr);
  }
  // δ = Jᵀu with u = (JJᵀ + λI)⁻¹r from the factor.
  void dual_to_primal(T* delta) {
    const std::size_t m = ne_->m;
    backend_.copy(ne_->r.data(), u_.data(), m);
    backend_.potrs(m, factor_.data(), u_.data());
    backend_.gemv(Trans::kYes, m, ne_->n, T(1), ne_->j.data(), ne_->n, u_.data(), T(0), delta);
  }

  LinearAlgebra<T>& backend_;
  DeviceBuffer<T> gram_, factor_, u_;
  const NormalEquations<T>* ne_ = nullptr;
};

// Preconditioned CG on (JᵀJ + λD)δ = g, J (m × n) the rank's stored rows.  Every vector but
// J·p is n long and identical on all ranks (built from all-reduced quantities), so every rank
// computes the same iterates.
template <typename T>
class CgSolver final : public LinearSolver<T> {
 public:
  CgSolver(LinearAlgebra<T>& backend, std::size_t n, std::size_t max_residuals,
           Collectives<T>* collectives, const SolverOptions& options)
      : backend_(backend),
        n_(n),
        collectives_(collectives),
        forcing_(options.cg_forcing),
        max_iterations_(options.cg_max_iterations > 0 ? options.cg_max_iterations : n),
        jp_(backend.allocate(std::max<std::size_t>(max_residuals, 1))) {
    for (auto* b : {&diag_, &m_inv_, &x_, &r_, &z_, &p_, &q_, &tmp_}) *b = backend.allocate(n);
  }
  LinearSolverType type() const override { return LinearSolverType::kCg; }
  int iterations() const override { return iterations_; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override {
    if (!ne.jacobian_stored)
      throw InvalidArgument("cg solver: the normal equations were built without J stored");
    ne_ = &ne;
    d_ = d;
    backend_.column_sums_of_squares(ne.m, n_, ne.j.data(), n_, diag_.data());
    if (collectives_ != nullptr) collectives_->sum_device(diag_.data(), n_);
    if (ne.shift > 0) {  // diag(JᵀJ + ρI)
      backend_.fill(tmp_.data(), n_, static_cast<T>(ne.shift));
      backend_.axpy(n_, T(1), tmp_.data(), diag_.data());
    }
    return true;
  }
  bool solve(double lambda, T* delta) override {
    lambda_ = lambda;
    return iterate(ne_->g.data(), delta);
  }
  bool solve_again(const T* rhs, T* x) override { return iterate(rhs, x); }

 private:
  // Preconditioned CG on (JᵀJ + λD)x = rhs from x = 0, λ of the last solve().
  bool iterate(const T* rhs, T* delta) {
    const auto l = static_cast<T>(lambda_);
    // Jacobi preconditioner M = diag(JᵀJ) + λD, inverted once per λ.
    if (d_ != nullptr) {
      backend_.add_scaled(n_, diag_.data(), l, d_, tmp_.data());
    } else {
      backend_.fill(tmp_.data(), n_, l);
      backend_.axpy(n_, T(1), diag_.data(), tmp_.data());
    }
    backend_.fill(m_inv_.data(), n_, T(1));
    backend_.scale_elementwise(n_, m_inv_.data(), tmp_.data(), /*divide=*/true, m_inv_.data());
    if (!backend_.all_finite(n_, m_inv_.data())) return false;

    backend_.fill(x_.data(), n_, T(0));
    backend_.copy(rhs, r_.data(), n_);
    backend_.scale_elementwise(n_, r_.data(), m_inv_.data(), false, z_.data());
    backend_.copy(z_.data(), p_.data(), n_);
    double rz = backend_.dot(n_, r_.data(), z_.data());
    const double target = forcing_ * std::sqrt(backend_.dot(n_, rhs, rhs));
    iterations_ = 0;
    for (std::size_t k = 0; k < max_iterations_; ++k) {
      // q = Jᵀ(J p) summed over ranks, + λ D p.
      backend_.fill(q_.data(), n_, T(0));
      if (ne_->m > 0) {
        backend_.gemv(Trans::kNo, ne_->m, n_, T(1), ne_->j.data(), n_, p_.data(), T(0), jp_.data());
        backend_.gemv(Trans::kYes, ne_->m, n_, T(1), ne_->j.data(), n_, jp_.data(), T(0),
                      q_.data());
      }
      if (collectives_ != nullptr) collectives_->sum_device(q_.data(), n_);
      if (ne_->shift > 0) backend_.axpy(n_, static_cast<T>(ne_->shift), p_.data(), q_.data());
      if (d_ != nullptr) {
        backend_.scale_elementwise(n_, p_.data(), d_, false, tmp_.data());
        backend_.axpy(n_, l, tmp_.data(), q_.data());
      } else {
        backend_.axpy(n_, l, p_.data(), q_.data());
      }
      const double pq = backend_.dot(n_, p_.data(), q_.data());
      if (!(pq > 0) || !std::isfinite(pq)) return false;
      const double alpha = rz / pq;
      backend_.axpy(n_, static_cast<T>(alpha), p_.data(), x_.data());
      backend_.axpy(n_, static_cast<T>(-alpha), q_.data(), r_.data());
      ++iterations_;
      if (std::sqrt(backend_.dot(n_, r_.data(), r_.data())) <= target) break;
      backend_.scale_elementwise(n_, r_.data(), m_inv_.data(), false, z_.data());
      const double rz_next = backend_.dot(n_, r_.data(), z_.data());
      backend_.add_scaled(n_, z_.data(), static_cast<T>(rz_next / rz), p_.data(), p_.data());
      rz = rz_next;
    }
    backend_.copy(x_.data(), delta, n_);
    return true;
  }

  LinearAlgebra<T>& backend_;
  std::size_t n_;
  Collectives<T>* collectives_;
  double forcing_;
  std::size_t max_iterations_;
  DeviceBuffer<T> jp_, diag_, m_inv_, x_, r_, z_, p_, q_, tmp_;
  const NormalEquations<T>* ne_ = nullptr;
  const T* d_ = nullptr;
  double lambda_ = 0;
  int iterations_ = 0;
};

}  // namespace

template <typename T>
std::unique_ptr<LinearSolver<T>> LinearSolver<T>::create(LinearSolverType type,
                                                         LinearAlgebra<T>& backend, std::size_t n,
                                                         std::size_t max_residuals,
                                                         Collectives<T>* collectives,
                                                         const SolverOptions& options) {
  switch (type) {
    case LinearSolverType::kCg:
      return std::make_unique<CgSolver<T>>(backend, n, max_residuals, collectives, options);
    case LinearSolverType::kCholesky:
      return std::make_unique<CholeskySolver<T>>(backend, n, options.cuda_graphs);
    case LinearSolverType::kEigen:
      return std::make_unique<EigenSolver<T>>(backend, n);
    case LinearSolverType::kDual:
      return std::make_unique<DualSolver<T>>(backend, max_residuals);
    case LinearSolverType::kDistributedCholesky:
      throw InvalidArgument(
          "LinearSolver::create: distributed_cholesky solves on the ranks' distributed A; the LM "
          "step makes it (DistributedCholeskySolver)");
    case LinearSolverType::kAuto:
      break;
  }
  throw InvalidArgument("LinearSolver::create needs a resolved solver type, not \"auto\"");
}

template <typename T>
std::size_t LinearSolver<T>::workspace_elements(LinearSolverType type, std::size_t n,
                                                std::size_t max_residuals) {
  switch (type) {
    case LinearSolverType::kCholesky:
      return n * n;  // the factor
    case LinearSolverType::kEigen:
      return n * n + 6 * n;        // eigenvectors, 6 n-vectors
    case LinearSolverType::kDual:  // the m × m Gram, its factor, u
      return 2 * max_residuals * max_residuals + max_residuals;
    case LinearSolverType::kCg:
      return std::max<std::size_t>(max_residuals, 1) + 8 * n;
    case LinearSolverType::kDistributedCholesky:  // DistributedCholeskySolver::workspace_elements
    case LinearSolverType::kAuto:
      break;
  }
  return 0;
}

template class LinearSolver<float>;
template class LinearSolver<double>;

}  // namespace lmtrain
