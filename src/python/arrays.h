// NumPy matrices as the library's inputs.  The Python layer hands over C-contiguous float32 or
// float64 arrays (converting anything else once, with numpy); here they are read in place — no
// copy is made until the one the library's data set owns, which is also where standardization
// happens, in double and rounded to the model's precision once, exactly as `lmtrain fit` does.
#pragma once

#include <nanobind/ndarray.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lmtrain/io/standardization.h"

namespace lmtrain::python {

// A read-only, C-contiguous CPU array of any dtype; MatrixView checks it.
using HostArray = nanobind::ndarray<nanobind::ro, nanobind::c_contig, nanobind::device::cpu>;

// A rows × cols float32 or float64 matrix read in place.
class MatrixView {
 public:
  // Throws TypeError (dtype) or ValueError (rank) naming `what` ("X", "y") and what was expected.
  MatrixView(const HostArray& array, std::string what);

  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  bool is_double() const { return is_double_; }
  const std::string& what() const { return what_; }
  template <typename S>
  std::span<const S> values() const {
    return {static_cast<const S*>(data_), rows_ * cols_};
  }
  double at(std::size_t row, std::size_t col) const {
    const std::size_t i = row * cols_ + col;
    return is_double_ ? static_cast<const double*>(data_)[i]
                      : static_cast<double>(static_cast<const float*>(data_)[i]);
  }

 private:
  const void* data_ = nullptr;
  std::size_t rows_ = 0, cols_ = 0;
  bool is_double_ = true;
  std::string what_;
};

// The standardization fitted on `rows` of `m` (all rows when null), on the values as given;
// weighted by `weights[row]` (one per row of `m`) when given.
io::Standardization fit_standardization(const MatrixView& m, const std::vector<std::size_t>* rows,
                                        std::span<const double> weights = {});

// `rows` of `m` (all when null) as the library's row-major T values: each value standardized with
// `s` in double, then rounded to T once.
template <typename T>
std::vector<T> library_values(const MatrixView& m, const std::vector<std::size_t>* rows,
                              const io::Standardization& s);

// One-hot rows (classes columns) of the class indices in `labels` (int64, 1-D) at `rows`.
template <typename T>
std::vector<T> one_hot_rows(const HostArray& labels, std::size_t classes,
                            const std::vector<std::size_t>* rows);

}  // namespace lmtrain::python

namespace lmtrain::python {

// `values` handed to NumPy without a copy: the array owns them.
template <typename T>
nanobind::ndarray<nanobind::numpy, T> numpy_array(std::vector<T> values,
                                                  std::initializer_list<std::size_t> shape) {
  auto owned = std::make_unique<std::vector<T>>(std::move(values));
  T* data = owned->data();
  nanobind::capsule owner(owned.get(), [](void* p) noexcept {
    std::unique_ptr<std::vector<T>>(static_cast<std::vector<T>*>(p));
  });
  owned.release();  // the capsule deletes it
  return nanobind::ndarray<nanobind::numpy, T>(data, shape, owner);
}

}  // namespace lmtrain::python
