// Stops decided outside the LM step — an iteration callback, the wall-clock budget, the stop
// flag (SIGINT/SIGTERM) — may differ between ranks (each rank's clock and callbacks are its
// own).  They are summed over the ranks after every step, so any rank's reason stops them all at
// the same step and no rank is left waiting in the next step's collectives.
#pragma once

#include "lmtrain/core/timer.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain {

struct StopRequests {
  bool callback = false;   // an iteration callback returned kStop
  bool time = false;       // TrainerOptions::max_time_seconds reached
  bool interrupt = false;  // the stop flag was raised
};

// Every rank's requests, or-ed over the ranks (one all-reduce of three values with several).
StopRequests agree_on_stops(const StopRequests& local, dist::Communicator* comm, PhaseTimes& times);

}  // namespace lmtrain
