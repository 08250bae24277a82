#include "lmtrain/solve/linear_solver.h"

#include <fmt/format.h>

#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

// (A + λD) = LLᵀ, then two triangular solves.  Refactors for every λ: n³/3 flops a retry.
template <typename T>
class CholeskySolver final : public LinearSolver<T> {
 public:
  CholeskySolver(Backend<T>& backend, std::size_t n)
      : backend_(backend), n_(n), factor_(backend.allocate(n * n)) {}
  LinearSolverType type() const override { return LinearSolverType::kCholesky; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override {
    ne_ = &ne;
    d_ = d;
    return true;
  }
  bool solve(double lambda, T* delta) override {
    backend_.copy(ne_->a.data(), factor_.data(), n_ * n_);
    backend_.add_diagonal(n_, factor_.data(), static_cast<T>(lambda), d_);
    if (backend_.potrf(n_, factor_.data()) != 0) return false;
    backend_.copy(ne_->g.data(), delta, n_);
    backend_.potrs(n_, factor_.data(), delta);
    return true;
  }

 private:
  Backend<T>& backend_;
  std::size_t n_;
  DeviceBuffer<T> factor_;
  const NormalEquations<T>* ne_ = nullptr;
  const T* d_ = nullptr;
};

// With S = D^{-½}: SAS = QΛQᵀ once per step; δ = S Q (Λ + λI)⁻¹ Qᵀ S g for every λ, O(n²).
template <typename T>
class EigenSolver final : public LinearSolver<T> {
 public:
  EigenSolver(Backend<T>& backend, std::size_t n)
      : backend_(backend),
        n_(n),
        q_(backend.allocate(n * n)),
        w_(backend.allocate(n)),
        c_(backend.allocate(n)),
        s_(backend.allocate(n)),
        ones_(backend.allocate(n)),
        tmp_(backend.allocate(n)) {
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
    backend_.add_scaled(n_, w_.data(), static_cast<T>(lambda), ones_.data(), tmp_.data());
    backend_.scale_elementwise(n_, c_.data(), tmp_.data(), /*divide=*/true, tmp_.data());
    backend_.gemv(Trans::kYes, n_, n_, T(1), q_.data(), n_, tmp_.data(), T(0), delta);
    if (scaled_) backend_.scale_elementwise(n_, delta, s_.data(), false, delta);
    return true;
  }

 private:
  Backend<T>& backend_;
  std::size_t n_;
  DeviceBuffer<T> q_, w_, c_, s_, ones_, tmp_;
  bool scaled_ = false;
  bool ready_ = false;
  double w_min_ = 0;
};

// δ = Jᵀu with (JJᵀ + λI)u = r: an m × m system, cheaper than n × n when m < n.
template <typename T>
class DualSolver final : public LinearSolver<T> {
 public:
  DualSolver(Backend<T>& backend, std::size_t max_residuals)
      : backend_(backend),
        gram_(backend.allocate(max_residuals * max_residuals)),
        factor_(backend.allocate(max_residuals * max_residuals)),
        u_(backend.allocate(max_residuals)) {}
  LinearSolverType type() const override { return LinearSolverType::kDual; }
  bool prepare(const NormalEquations<T>& ne, const T* d) override {
    if (!ne.dual)
      throw InvalidArgument("dual solver: the normal equations were built without J stored");
    if (d != nullptr)
      throw InvalidArgument("dual solver: only D = I is supported (damping_matrix = identity)");
    ne_ = &ne;
    backend_.syrk_aat(ne.m, ne.n, T(1), ne.j.data(), ne.n, T(0), gram_.data());
    return true;
  }
  bool solve(double lambda, T* delta) override {
    const std::size_t m = ne_->m;
    backend_.copy(gram_.data(), factor_.data(), m * m);
    backend_.add_diagonal(m, factor_.data(), static_cast<T>(lambda), nullptr);
    if (backend_.potrf(m, factor_.data()) != 0) return false;
    backend_.copy(ne_->r.data(), u_.data(), m);
    backend_.potrs(m, factor_.data(), u_.data());
    backend_.gemv(Trans::kYes, m, ne_->n, T(1), ne_->j.data(), ne_->n, u_.data(), T(0), delta);
    return true;
  }

 private:
  Backend<T>& backend_;
  DeviceBuffer<T> gram_, factor_, u_;
  const NormalEquations<T>* ne_ = nullptr;
};

}  // namespace

template <typename T>
std::unique_ptr<LinearSolver<T>> LinearSolver<T>::create(LinearSolverType type, Backend<T>& backend,
                                                         std::size_t n, std::size_t max_residuals) {
  switch (type) {
    case LinearSolverType::kCholesky: return std::make_unique<CholeskySolver<T>>(backend, n);
    case LinearSolverType::kEigen: return std::make_unique<EigenSolver<T>>(backend, n);
    case LinearSolverType::kDual: return std::make_unique<DualSolver<T>>(backend, max_residuals);
    case LinearSolverType::kAuto: break;
  }
  throw InvalidArgument("LinearSolver::create needs a resolved solver type, not \"auto\"");
}

template class LinearSolver<float>;
template class LinearSolver<double>;

}  // namespace lmtrain
