#include "foreign_source.h"

#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

int dlpack_device(const DeviceQueue& device) {
  return device.device_kind() == DeviceKind::kCuda ? nb::device::cuda::value
                                                   : nb::device::cpu::value;
}

const char* dtype_name(float*) {
  return "float32";
}
const char* dtype_name(double*) {
  return "float64";
}

// Raises a Python exception from inside a call (the GIL is held): the source records it.
[[noreturn]] void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw nb::python_error();
}

}  // namespace

template <typename T>
SourceFootprint ForeignSource<T>::footprint(std::size_t batch, bool trial_residuals) const {
  const std::size_t rows_of_j = shape_.residuals_per_unit * shape_.params * sizeof(T);
  SourceFootprint f;
  f.fixed_bytes = (trial_residuals ? 3 : 1) * batch * shape_.residuals_per_unit * sizeof(T);
  if (shape_.measured_bytes_per_unit > 0) {
    f.bytes_per_slice_sample = std::max(rows_of_j, shape_.measured_bytes_per_unit);
  } else {
    f.bytes_per_slice_sample = (shape_.slice_capped ? 1 : 3) * rows_of_j;
  }
  f.measured = shape_.measured;
  return f;
}

template <typename T>
ForeignSource<T>::ForeignSource(nb::object callbacks, LinearAlgebra<T>& backend, Shape shape)
    : callbacks_(std::move(callbacks)), backend_(backend), shape_(std::move(shape)) {
  for (const char* name : {"linearize", "jacobian", "objective", "residuals_at"})
    if (!nb::hasattr(callbacks_, name))
      throw nb::type_error(
          fmt::format("the linearization object has no method {}(); it needs linearize, "
                      "jacobian, objective and residuals_at",
                      name)
              .c_str());
  has_transpose_product_ = nb::hasattr(callbacks_, "jacobian_transpose_times");
  has_memory_hook_ = nb::hasattr(callbacks_, "use_memory_plan");
}

template <typename T>
void ForeignSource<T>::reserve(std::size_t batch, std::size_t slice) {
  if (!has_memory_hook_) return;
  const std::size_t bytes = slice * footprint(batch, false).bytes_per_slice_sample;
  nb::gil_scoped_acquire gil;
  if (failed_) return;
  try {
    callbacks_.attr("use_memory_plan")(bytes);
  } catch (nb::python_error& e) {
    fail(e);  // the step then ends with NaN residuals and raises it
  }
}

template <typename T>
nb::object ForeignSource<T>::view(const T* data, std::size_t n) const {
  nb::ndarray<nb::pytorch, T, nb::ndim<1>> a(const_cast<T*>(data), {n}, nb::handle(), {},
                                             nb::dtype<T>(), dlpack_device(backend_),
                                             backend_.device_index());
  return nb::cast(a, nb::rv_policy::reference);
}

template <typename T>
nb::ndarray<> ForeignSource<T>::checked_vector(nb::handle value, std::size_t n,
                                               const char* what) const {
  nb::ndarray<> a;
  if (!nb::try_cast(value, a))
    raise(PyExc_TypeError,
          fmt::format("{} must be a tensor (DLPack), not {}", what, nb::str(value.type()).c_str()));
  const bool on_device =
      a.device_type() == dlpack_device(backend_) &&
      (a.device_type() == nb::device::cpu::value || a.device_id() == backend_.device_index());
  if (a.ndim() != 1 || a.shape(0) != n || a.dtype() != nb::dtype<T>() || !on_device ||
      (n > 1 && a.stride(0) != 1))
    raise(PyExc_ValueError,
          fmt::format("{} must be a contiguous vector of {} {} values on {}", what, n,
                      dtype_name(static_cast<T*>(nullptr)), backend_.name()));
  return a;
}

template <typename T>
void ForeignSource<T>::fail(nb::python_error& error) {
  if (!failed_) error_.emplace(std::move(error));
  failed_ = true;
}

template <typename T>
double ForeignSource<T>::linearize(const T* params, const T*, const T*, std::size_t batch) {
  batch_ = batch;
  const std::size_t m = batch * shape_.residuals_per_unit;
  nb::gil_scoped_acquire gil;
  if (!failed_) {
    try {
      try {
        const nb::object out = callbacks_.attr("linearize")(view(params, shape_.params));
        const nb::tuple pair = nb::cast<nb::tuple>(out);
        if (pair.size() != 2 && pair.size() != 3)
          raise(PyExc_ValueError,
                "linearize() must return (objective, residuals) or (objective, residuals, "
                "blocks)");
        const double f = nb::cast<double>(pair[0]);
        residuals_array_ = checked_vector(pair[1], m, "linearize()'s residuals");
        residuals_ = static_cast<const T*>(residuals_array_.data());
        blocks_ = pair.size() == 3 ? checked_blocks(pair[2], m) : std::vector<ResidualBlock>();
        return f;
      } catch (nb::cast_error&) {
        raise(PyExc_TypeError, "linearize() must return (float, tensor[, blocks])");
      }
    } catch (nb::python_error& e) {
      fail(e);
    }
  }
  nan_residuals_.reserve(backend_.memory(), std::max<std::size_t>(m, 1));
  backend_.fill(nan_residuals_.data(), m, static_cast<T>(nan()));
  residuals_ = nan_residuals_.data();
  // The blocks seen last, with NaN losses (NaN · 0 rows): the same count as on the other ranks,
  // whose step sums them with this one's.
  for (ResidualBlock& b : blocks_) b = {b.name, 0, 0, nan()};
  return nan();
}

template <typename T>
std::vector<ResidualBlock> ForeignSource<T>::residual_blocks() const {
  if (batch_ > 0) return blocks_;
  // An empty shard (clear_batch): the blocks by name, with no rows on this rank.
  std::vector<ResidualBlock> none;
  for (const ResidualBlock& b : blocks_) none.push_back({b.name, 0, 0, b.scale});
  return none;
}

template <typename T>
std::vector<ResidualBlock> ForeignSource<T>::checked_blocks(nb::handle value, std::size_t m) {
  std::vector<ResidualBlock> out;
  for (nb::handle item : value) {
    ResidualBlock b;
    try {
      const nb::tuple t = nb::cast<nb::tuple>(item);
      if (t.size() != 4) throw nb::cast_error();
      b = {nb::cast<std::string>(t[0]), nb::cast<std::size_t>(t[1]), nb::cast<std::size_t>(t[2]),
           nb::cast<double>(t[3])};
    } catch (nb::cast_error&) {
      raise(PyExc_TypeError,
            fmt::format("linearize()'s block {} is {}; expected a tuple (name, first_row, rows, "
                        "scale): str, int ≥ 0, int ≥ 0, float",
                        out.size(), nb::repr(item).c_str()));
    }
    if (b.first_row > m || b.rows > m - b.first_row || !std::isfinite(b.scale))
      raise(PyExc_ValueError,
            fmt::format("linearize()'s block \"{}\" covers rows [{}, {}) with scale {} but the "
                        "residual vector has {} rows; a block must lie inside it with a finite "
                        "scale",
                        b.name, b.first_row, b.first_row + b.rows, b.scale, m));
    out.push_back(std::move(b));
  }
  return out;
}

template <typename T>
JacobianRows<T> ForeignSource<T>::jacobian_slice(const T* params, std::size_t first,
                                                 std::size_t count, T*, std::size_t) {
  const std::size_t n = shape_.params, rows = count * shape_.residuals_per_unit;
  nb::gil_scoped_acquire gil;
  if (!failed_) {
    try {
      try {
        const nb::object out = callbacks_.attr("jacobian")(view(params, n), first, count);
        nb::ndarray<> j;
        if (!nb::try_cast(out, j) || j.ndim() != 2 || j.shape(0) != rows || j.shape(1) != n ||
            j.dtype() != nb::dtype<T>() || j.device_type() != dlpack_device(backend_) ||
            (n > 1 && j.stride(1) != 1) || (rows > 1 && j.stride(0) < static_cast<int64_t>(n)))
          raise(PyExc_ValueError,
                fmt::format("jacobian({}, {}) must return rows × n = {} × {} {} values with "
                            "contiguous rows on {}",
                            first, count, rows, n, dtype_name(static_cast<T*>(nullptr)),
                            backend_.name()));
        const std::size_t ld = rows > 1 ? static_cast<std::size_t>(j.stride(0)) : n;
        slice_array_ = std::move(j);
        return {static_cast<const T*>(slice_array_.data()), ld};
      } catch (nb::cast_error&) {
        raise(PyExc_TypeError, "a callback returned something that is not a tensor");
      }
    } catch (nb::python_error& e) {
      fail(e);
    }
  }
  // A failed source lends zeros: the step's sums stay defined, its F is NaN everywhere.
  if (zero_slice_.size() < rows * n) {
    zero_slice_ = backend_.allocate(rows * n);
    backend_.fill(zero_slice_.data(), rows * n, T(0));
  }
  return {zero_slice_.data(), n};
}

template <typename T>
double ForeignSource<T>::objective(const T* params) {
  nb::gil_scoped_acquire gil;
  if (failed_) return nan();
  try {
    try {
      return nb::cast<double>(callbacks_.attr("objective")(view(params, shape_.params)));
    } catch (nb::cast_error&) {
      raise(PyExc_TypeError, "objective() must return a float");
    }
  } catch (nb::python_error& e) {
    fail(e);
  }
  return nan();
}

template <typename T>
void ForeignSource<T>::residuals_at(const T* params, T* r) {
  const std::size_t m = batch_ * shape_.residuals_per_unit;
  nb::gil_scoped_acquire gil;
  if (!failed_) {
    try {
      try {
        const nb::object out = callbacks_.attr("residuals_at")(view(params, shape_.params));
        const nb::ndarray<> a = checked_vector(out, m, "residuals_at()'s residuals");
        backend_.copy(static_cast<const T*>(a.data()), r, m);
        return;
      } catch (nb::cast_error&) {
        raise(PyExc_TypeError, "a callback returned something that is not a tensor");
      }
    } catch (nb::python_error& e) {
      fail(e);
    }
  }
  backend_.fill(r, m, static_cast<T>(nan()));
}

template <typename T>
bool ForeignSource<T>::jacobian_transpose_times(const T* params, const T* u, T* out) {
  const std::size_t n = shape_.params, m = batch_ * shape_.residuals_per_unit;
  nb::gil_scoped_acquire gil;
  if (!failed_) {
    try {
      try {
        const nb::object result =
            callbacks_.attr("jacobian_transpose_times")(view(params, n), view(u, m));
        if (result.is_none()) return false;
        const nb::ndarray<> a = checked_vector(result, n, "jacobian_transpose_times()'s result");
        backend_.copy(static_cast<const T*>(a.data()), out, n);
        return true;
      } catch (nb::cast_error&) {
        raise(PyExc_TypeError, "a callback returned something that is not a tensor");
      }
    } catch (nb::python_error& e) {
      fail(e);
    }
  }
  backend_.fill(out, n, static_cast<T>(nan()));
  return true;
}

template <typename T>
void ForeignSource<T>::set_draw_key(std::uint64_t key) {
  nb::gil_scoped_acquire gil;
  if (failed_ || !nb::hasattr(callbacks_, "set_draw_key")) return;
  try {
    callbacks_.attr("set_draw_key")(key);
  } catch (nb::python_error& e) {
    fail(e);
  }
}

template <typename T>
std::optional<nb::python_error> ForeignSource<T>::take_error() {
  std::optional<nb::python_error> e = std::move(error_);
  error_.reset();
  failed_ = false;
  return e;
}

template <typename T>
void ForeignSource<T>::release_borrowed() {
  residuals_array_ = nb::ndarray<>();
  slice_array_ = nb::ndarray<>();
  residuals_ = nullptr;
}

template class ForeignSource<float>;
template class ForeignSource<double>;

}  // namespace lmtrain::python
