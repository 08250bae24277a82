// Umbrella header of lmtrain's C++ API.
#pragma once

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/error.h"
#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/model_spec.h"
#include "lmtrain/nn/sequential.h"
#include "lmtrain/solve/solver_options.h"
#include "lmtrain/train/predict.h"
#include "lmtrain/train/summary.h"
#include "lmtrain/train/trainer.h"
