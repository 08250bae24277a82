#include "lmtrain/nn/jacobian.h"

#include <algorithm>

namespace lmtrain {

template <typename T>
JacobianEngine<T>::JacobianEngine(const Sequential<T>& model, const Loss<T>& loss)
    : model_(model), loss_(loss), backend_(model.backend()) {}

template <typename T>
void JacobianEngine<T>::reserve(std::size_t batch, std::size_t slice) {
  const std::size_t rows = loss_.residuals_per_sample();
  model_.reserve(state_, batch);
  model_.reserve(trial_state_, batch);
  residuals_.reserve(backend_.memory(), batch * rows);
  seeds_.reserve(backend_.memory(), batch * rows * model_.outputs());
  g_a_.reserve(backend_.memory(), slice * rows * model_.max_width());
  g_b_.reserve(backend_.memory(), slice * rows * model_.max_width());
  slice_capacity_ = std::max(slice_capacity_, slice);
}

template <typename T>
void JacobianEngine<T>::release_slices() {
  g_a_ = DeviceBuffer<T>();
  g_b_ = DeviceBuffer<T>();
  slice_capacity_ = 0;
}

template <typename T>
const T* JacobianEngine<T>::forward_batch(const T* params, const T* x, const T* y,
                                          std::size_t batch) {
  reserve(batch, std::max<std::size_t>(slice_capacity_, 1));
  x_ = x;
  y_ = y;
  batch_ = batch;
  ++draw_key_;
  return model_.forward(params, x, batch, state_, /*keep_for_backward=*/true);
}

template <typename T>
double JacobianEngine<T>::linearize(const T* params, const T* x, const T* y, std::size_t batch) {
  const T* z = forward_batch(params, x, y, batch);
  return loss_.linearize(batch, z, y, residuals_.data(), seeds_.data(), draw_key_);
}

template <typename T>
void JacobianEngine<T>::linearize_into(const T* params, const T* x, const T* y, std::size_t batch,
                                       double* objective) {
  const T* z = forward_batch(params, x, y, batch);
  loss_.linearize(batch, z, y, residuals_.data(), seeds_.data(), draw_key_, objective);
}

template <typename T>
void JacobianEngine<T>::jacobian_rows(const T* params, std::size_t first, std::size_t count, T* j,
                                      std::size_t ldj) {
  reserve(batch_, count);
  const std::size_t group = loss_.residuals_per_sample();
  const auto& layers = model_.layers();
  // Seeds of the slice: rows first·R … (first + count)·R of S.
  T* g = g_a_.data();
  T* spare = g_b_.data();
  backend_.copy(seeds_.data() + first * group * model_.outputs(), g,
                count * group * model_.outputs());
  for (std::size_t i = layers.size(); i-- > 0;) {
    const Layer<T>& l = *layers[i];
    const T* in = i == 0 ? x_ : state_.outputs[i - 1].data();
    in += first * l.inputs();
    if (l.num_params() > 0) l.assemble_jacobian(backend_, in, count, group, g, j, ldj);
    if (i == 0) break;  // seeds w.r.t. the network input are not needed
    const T* saved = state_.saved[i].data() + first * l.saved_per_sample();
    T* result = l.backward(backend_, params + l.param_offset(), saved, count, group, g, spare);
    if (result == spare) std::swap(g, spare);
  }
}

template <typename T>
double JacobianEngine<T>::objective(const T* params) {
  const T* z = model_.forward(params, x_, batch_, trial_state_, /*keep_for_backward=*/false);
  return loss_.objective(batch_, z, y_);
}

template <typename T>
void JacobianEngine<T>::objective_into(const T* params, double* result) {
  const T* z = model_.forward(params, x_, batch_, trial_state_, /*keep_for_backward=*/false);
  loss_.objective(batch_, z, y_, result);
}

template <typename T>
void JacobianEngine<T>::residuals_at(const T* params, T* r) {
  trial_seeds_.reserve(backend_.memory(), batch_ * loss_.residuals_per_sample() * model_.outputs());
  trial_objective_.reserve(backend_.memory(), 1);
  const T* z = model_.forward(params, x_, batch_, trial_state_, /*keep_for_backward=*/false);
  // The loss's linearization writes the residuals (with the linearization's draws); its F and
  // seeds are not needed here.
  loss_.linearize(batch_, z, y_, r, trial_seeds_.data(), draw_key_, trial_objective_.data());
}

template <typename T>
std::optional<std::vector<std::uintptr_t>> JacobianEngine<T>::evaluation_key() const {
  if (model_.workspace_elements() > 0) return std::nullopt;
  const bool sampled = loss_.kind() == LossKind::kCrossEntropySampled;
  std::vector<std::uintptr_t> key{address_key(x_),
                                  address_key(y_),
                                  batch_,
                                  sampled ? draw_key_ : 0,
                                  address_key(residuals_.data()),
                                  address_key(trial_seeds_.data()),
                                  address_key(trial_objective_.data())};
  for (const DeviceBuffer<T>& b : trial_state_.outputs) key.push_back(address_key(b.data()));
  return key;
}

template class JacobianEngine<float>;
template class JacobianEngine<double>;

}  // namespace lmtrain
