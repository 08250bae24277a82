// Several devices driven by one process: a communicator whose ranks are threads of this process
// (lmtrain.torch.LMA(model, devices=[d0, d1, …]), cuPyLMA's device list).  Each thread runs the
// same LM step on its device's shard of the batch, and the ranks meet here exactly as MPI ranks
// meet in MPI's collectives: A, g and F are summed, rank 0's δ is broadcast, so every device keeps
// the same parameters and every decision of the step is the engine's, taken once.
//
// The sums are deterministic: element i of a sum is added in rank order (0, 1, …) whatever the
// threads' timing, and every rank receives the same bits.  Each rank reduces one contiguous chunk
// of the elements for all, so a sum of n values costs each of R threads about n values.
//
// Unlike a process, a thread that fails cannot be left behind by exiting: the other ranks would
// wait for it in their next collective forever.  cancel() (or a rank's abort()) breaks the group:
// every collective waiting now or called later throws lmtrain::Error with the reason, and the
// threads unwind.  A broken group stays broken.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {

class DeviceGroup {
 public:
  // The communicators of `ranks` ranks (≥ 1), rank r at index r; each is used by one thread.
  // They share this group's state and keep it alive.
  static std::shared_ptr<DeviceGroup> create(int ranks);
  virtual ~DeviceGroup() = default;
  virtual int size() const = 0;
  // Hands out rank r's communicator (once per rank).
  virtual std::unique_ptr<Communicator> member(int rank) = 0;
  // Breaks the group: waiting and later collectives throw lmtrain::Error naming `reason`.
  virtual void cancel(const std::string& reason) = 0;
  virtual bool cancelled() const = 0;
};

}  // namespace lmtrain::dist
