#include "lmtrain/solve/distributed_cholesky.h"

#include "lmtrain/core/error.h"

namespace lmtrain {

template <typename T>
bool DistributedCholeskySolver<T>::prepare(const NormalEquations<T>& ne, const T* d) {
  if (ne.distributed != &a_)
    throw InvalidArgument(
        "distributed_cholesky solver: the normal equations were not built into its distributed A");
  ne_ = &ne;
  d_ = d;
  factored_ = false;
  return true;
}

template <typename T>
bool DistributedCholeskySolver<T>::solve(double lambda, T* delta) {
  // A penalty's ρI is the shift: A itself stays the data's JᵀJ, as the builder summed it.
  factored_ = a_.factor(lambda, d_, ne_->shift) == 0;
  if (!factored_) return false;
  a_.solve(ne_->g.data(), delta);
  return true;
}

template <typename T>
bool DistributedCholeskySolver<T>::solve_again(const T* rhs, T* x) {
  if (!factored_) return false;
  a_.solve(rhs, x);
  return true;
}

template <typename T>
std::size_t DistributedCholeskySolver<T>::workspace_elements(std::size_t n, std::size_t nb,
                                                             int ranks, DeviceKind device) {
  const dist::ProcessGrid grid = dist::ProcessGrid::for_ranks(ranks, 0);
  const dist::BlockCyclicLayout layout{n, dist::BlockCyclicLayout::block_size(nb, n, grid), grid};
  return dist::DistributedNormalMatrix<T>::elements(layout, device);
}

template class DistributedCholeskySolver<float>;
template class DistributedCholeskySolver<double>;

}  // namespace lmtrain
