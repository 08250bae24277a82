// Device memory: a MemoryResource allocates bytes on one device (host RAM for the CPU backend,
// GPU memory for CUDA); DeviceBuffer<T> owns a typed allocation from it (RAII, move-only).
// Code above the backend only passes these pointers to backend operations, never dereferences
// them, so it runs unchanged on any device.
#pragma once

#include <cstddef>
#include <utility>

namespace lmtrain {

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // Returns memory aligned to at least 64 bytes, or throws lmtrain::MemoryPlanError / BackendError.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  // Bytes allocated through this resource now, and the most at any time since it was created:
  // what the memory planner's figures are checked against.
  std::size_t bytes_in_use() const noexcept { return in_use_; }
  std::size_t peak_bytes_in_use() const noexcept { return peak_; }
  // Starts a new peak from what is in use now (the trainer does at the start of fit).
  void reset_peak() noexcept { peak_ = in_use_; }

 protected:
  // Implementations call these after a successful allocation and on every deallocation.
  void count_allocation(std::size_t bytes) noexcept {
    in_use_ += bytes;
    if (in_use_ > peak_) peak_ = in_use_;
  }
  void count_deallocation(std::size_t bytes) noexcept { in_use_ -= bytes; }

 private:
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
};

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(MemoryResource& resource, std::size_t count) : resource_(&resource), count_(count) {
    if (count_ > 0) data_ = static_cast<T*>(resource_->allocate(count_ * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      swap(other);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }

  // Grows (never shrinks) to hold at least `count` elements; contents are not preserved.
  void reserve(MemoryResource& resource, std::size_t count) {
    if (count <= count_ && resource_ == &resource) return;
    DeviceBuffer fresh(resource, count);
    *this = std::move(fresh);
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) resource_->deallocate(data_, count_ * sizeof(T));
    data_ = nullptr;
    count_ = 0;
  }
  void swap(DeviceBuffer& other) noexcept {
    std::swap(resource_, other.resource_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }

  MemoryResource* resource_ = nullptr;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace lmtrain
