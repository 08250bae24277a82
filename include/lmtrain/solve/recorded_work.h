// Work of an LM attempt queued from a recording (SolverOptions::cuda_graphs; issue 36, item 3):
// the trial's forward pass, the geodesic correction — launched as one graph instead of a kernel
// at a time, where the launches, not the kernels, take the time (a small network on a GPU).
//
// A recording holds the buffers and host values its calls were given (DeviceQueue::record), so
// it is replayed only while they are the same: the caller names them in a key (the buffers, the
// sizes, the source's LinearizationSource::evaluation_key).  The first time a key is seen the
// work runs queued call by call — the buffers it grows are allocated, the kernels loaded, the
// libraries' first-call choices made, none of which a recording can hold —, the second time it is
// recorded and replayed, and from then on replayed while the key stays and the recording is
// valid (QueueRecording::valid: no workspace of the backend moved).  A device that refuses to
// record it turns the recording off for good, with its reason in report(); the work then runs
// queued as before.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmtrain/backend/device_queue.h"

namespace lmtrain {

class RecordedWork {
 public:
  using Key = std::vector<std::uintptr_t>;
  // `what` names the work in the report ("the trial").
  RecordedWork(DeviceQueue& queue, std::string what) : queue_(queue), what_(std::move(what)) {}

  // Queues `work` under `key` as above.  True where `work` itself ran (queued call by call, or
  // recorded then replayed: the host values it computes are this call's); false where a recording
  // was replayed without it.
  bool run(const Key& key, const std::function<void()>& work);
  // False once the device refused a recording: run() queues call by call from then on.
  bool recording() const { return refused_.empty(); }
  // "SolverOptions::cuda_graphs: the trial replayed from one recording (1 recorded, 40
  // replays)", or "… the trial queued call by call, <the device's reason>"; empty before
  // anything was recorded or refused.
  std::string report() const;

 private:
  DeviceQueue& queue_;
  std::string what_;
  std::string refused_;  // the device's reason, once it refused: no more recordings
  Key key_;              // of the recording, or of the last run queued call by call
  bool seen_ = false;    // key_ has run queued call by call
  std::unique_ptr<QueueRecording> recording_;
  int recordings_ = 0;
  std::uint64_t replays_ = 0;
};

}  // namespace lmtrain
