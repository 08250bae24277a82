// The activation loops compiled for AVX-512 (16 floats wide; see activation_loops.h).
#define LMTRAIN_ISA avx512
#include "activation_loops.inc"
