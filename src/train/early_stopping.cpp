#include "lmtrain/train/early_stopping.h"

namespace lmtrain {

template <typename T>
void EarlyStopping<T>::start(const T* theta, double loss, TrainingProgress& progress) {
  progress.initial_validation_loss = progress.best_validation_loss = loss;
  backend_.copy(theta, best_.data(), n_);
}

template <typename T>
bool EarlyStopping<T>::update(int epoch, double loss, const T* theta, TrainingProgress& progress) {
  progress.final_validation_loss = loss;
  if (loss < progress.best_validation_loss) {
    progress.best_validation_loss = loss;
    progress.best_epoch = epoch;
    failures_ = 0;
    backend_.copy(theta, best_.data(), n_);
    return false;
  }
  return ++failures_ >= max_failures_;
}

template <typename T>
bool EarlyStopping<T>::restore(T* theta, const TrainingProgress& progress) {
  if (!(progress.best_validation_loss < progress.final_validation_loss)) return false;
  backend_.copy(best_.data(), theta, n_);
  return true;
}

template class EarlyStopping<float>;
template class EarlyStopping<double>;

}  // namespace lmtrain
