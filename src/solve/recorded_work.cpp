#include "lmtrain/solve/recorded_work.h"

#include <fmt/format.h>

namespace lmtrain {

bool RecordedWork::run(const Key& key, const std::function<void()>& work) {
  if (!refused_.empty()) {
    work();
    return true;
  }
  const bool same = seen_ && key == key_;
  if (same && recording_ && recording_->valid()) {
    recording_->replay();
    ++replays_;
    return false;
  }
  recording_.reset();
  if (!same) {  // first seen: queued call by call, which warms what a recording cannot
    key_ = key;
    seen_ = true;
    work();
    return true;
  }
  std::string why;
  recording_ = queue_.record(work, why);
  if (!recording_) {
    refused_ = why.empty() ? "the device refused to record it" : why;
    work();
    return true;
  }
  ++recordings_;
  recording_->replay();
  ++replays_;
  return true;
}

std::string RecordedWork::report() const {
  if (!refused_.empty())
    return fmt::format("SolverOptions::cuda_graphs: {} queued call by call, {}", what_, refused_);
  if (recordings_ == 0) return {};
  return fmt::format(
      "SolverOptions::cuda_graphs: {} replayed from one recording ({} recorded, {} "
      "replays)",
      what_, recordings_, replays_);
}

}  // namespace lmtrain
