// The activation loops compiled for AVX2 + FMA (see activation_loops.h).
#define LMTRAIN_ISA avx2
#include "activation_loops.inc"
