#include "lmtrain/dist/device_group.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "lmtrain/core/error.h"

namespace lmtrain::dist {
namespace {

// The ranks' shared state: a cancellable barrier and one published pointer per rank.
class GroupState final : public DeviceGroup, public std::enable_shared_from_this<GroupState> {
 public:
  explicit GroupState(int ranks)
      : size_(ranks),
        handed_out_(static_cast<std::size_t>(ranks), false),
        slots_(static_cast<std::size_t>(ranks), nullptr),
        chunks_(static_cast<std::size_t>(ranks), nullptr) {}

  int size() const override { return size_; }
  std::unique_ptr<Communicator> member(int rank) override;
  void cancel(const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!broken_) reason_ = reason;
      broken_ = true;
    }
    wake_.notify_all();
  }
  bool cancelled() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return broken_;
  }

  // Every rank calls it; returns once all have, or throws when the group is (or gets) broken.
  void wait_for_all() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) throw_broken();
    const std::uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      lock.unlock();
      wake_.notify_all();
      return;
    }
    wake_.wait(lock, [&] { return generation_ != generation || broken_; });
    if (generation_ == generation) throw_broken();
  }

  // Publishes `p` as rank's pointer, and waits until every rank has published its own.  A sum's
  // partial chunks have slots of their own: a rank that publishes its chunk must not overwrite
  // the input pointer another rank may still be reading.
  void publish(int rank, const void* p) {
    slots_[static_cast<std::size_t>(rank)] = p;
    wait_for_all();
  }
  void publish_chunk(int rank, const void* p) {
    chunks_[static_cast<std::size_t>(rank)] = p;
    wait_for_all();
  }
  const void* slot(int rank) const { return slots_[static_cast<std::size_t>(rank)]; }
  const void* chunk(int rank) const { return chunks_[static_cast<std::size_t>(rank)]; }

 private:
  [[noreturn]] void throw_broken() const {
    throw Error(fmt::format("the device group was stopped: {}", reason_));
  }

  const int size_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool broken_ = false;
  std::string reason_;
  std::vector<bool> handed_out_;
  // Written by its own rank before a barrier, read by the others after it.
  std::vector<const void*> slots_, chunks_;
};

class GroupMember final : public Communicator {
 public:
  GroupMember(std::shared_ptr<GroupState> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size(); }
  int local_rank() const override { return rank_; }
  std::string name() const override {
    return fmt::format("threads ({} devices of one process)", state_->size());
  }
  void allreduce_sum(double* data, std::size_t n) override { sum(data, n); }
  void allreduce_sum(float* data, std::size_t n) override { sum(data, n); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    state_->publish(rank_, data);
    if (rank_ != root && bytes > 0) std::memcpy(data, state_->slot(root), bytes);
    state_->wait_for_all();  // the root's buffer stays as it is until every rank has read it
  }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    state_->publish(rank_, mine);
    auto* out = static_cast<unsigned char*>(all);
    for (int k = 0; k < size(); ++k)
      if (bytes > 0) std::memcpy(out + static_cast<std::size_t>(k) * bytes, state_->slot(k), bytes);
    state_->wait_for_all();
  }
  [[noreturn]] void abort(int /*code*/, const std::string& message) override {
    state_->cancel(fmt::format("rank {}: {}", rank_, message));
    throw Error(message);
  }

 private:
  // Three phases: every rank publishes its buffer; each adds its chunk of the elements over the
  // ranks in rank order into a buffer of its own; each copies every chunk back into its buffer.
  template <typename V>
  void sum(V* data, std::size_t n) {
    const auto ranks = static_cast<std::size_t>(size());
    const auto r = static_cast<std::size_t>(rank_);
    state_->publish(rank_, data);
    const std::size_t lo = n * r / ranks, hi = n * (r + 1) / ranks;
    std::vector<V> chunk(hi - lo);
    for (std::size_t i = lo; i < hi; ++i) {
      V s = static_cast<const V*>(state_->slot(0))[i];
      for (std::size_t k = 1; k < ranks; ++k)
        s += static_cast<const V*>(state_->slot(static_cast<int>(k)))[i];
      chunk[i - lo] = s;
    }
    state_->publish_chunk(rank_, chunk.data());  // every rank has read every input now
    for (std::size_t k = 0; k < ranks; ++k) {
      const std::size_t a = n * k / ranks, b = n * (k + 1) / ranks;
      if (b > a) std::memcpy(data + a, state_->chunk(static_cast<int>(k)), (b - a) * sizeof(V));
    }
    state_->wait_for_all();  // every rank has copied: the chunks may go
  }

  std::shared_ptr<GroupState> state_;
  int rank_;
};

std::unique_ptr<Communicator> GroupState::member(int rank) {
  if (rank < 0 || rank >= size_)
    throw InvalidArgument(fmt::format("device group rank {} of {} ranks", rank, size_));
  std::lock_guard<std::mutex> lock(mutex_);
  if (handed_out_[static_cast<std::size_t>(rank)])
    throw InvalidArgument(fmt::format("device group rank {} was handed out already", rank));
  handed_out_[static_cast<std::size_t>(rank)] = true;
  return std::make_unique<GroupMember>(shared_from_this(), rank);
}

}  // namespace

std::shared_ptr<DeviceGroup> DeviceGroup::create(int ranks) {
  if (ranks < 1)
    throw InvalidArgument(fmt::format("a device group needs at least one rank, not {}", ranks));
  return std::make_shared<GroupState>(ranks);
}

}  // namespace lmtrain::dist
