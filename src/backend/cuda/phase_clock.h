// The CUDA backend's PhaseClock (core/timer.h): each phase is a pair of CUDA events recorded on
// the backend's stream; collect() reads their elapsed times once the host has caught up with the
// stream anyway (the end of an LM step), so timing no longer drains the queue.  Events are
// reused from a pool, created without blocking sync.  Also the device-side ordering of one
// backend's stream after another's (mixed precision's two streams on one device).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "lmtrain/core/timer.h"

namespace lmtrain::cuda {

std::unique_ptr<PhaseClock> make_event_phase_clock(cudaStream_t stream);

// `stream` waits on the device for everything queued so far on `other`.
void order_after(cudaStream_t stream, cudaStream_t other);

}  // namespace lmtrain::cuda
