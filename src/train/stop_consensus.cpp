#include "lmtrain/train/stop_consensus.h"

namespace lmtrain {

StopRequests agree_on_stops(const StopRequests& local, dist::Communicator* comm,
                            PhaseTimes& times) {
  if (comm == nullptr || comm->size() == 1) return local;
  double votes[3] = {local.callback ? 1.0 : 0.0, local.time ? 1.0 : 0.0,
                     local.interrupt ? 1.0 : 0.0};
  {
    ScopedPhase timer(times, Phase::kCommunication);
    comm->allreduce_sum(votes, 3);
  }
  return {votes[0] > 0, votes[1] > 0, votes[2] > 0};
}

}  // namespace lmtrain
