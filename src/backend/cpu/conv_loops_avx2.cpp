// The direct convolution kernel compiled for AVX2 + FMA (8 floats per register; conv_loops.h).
#define LMTRAIN_ISA avx2
#define LMTRAIN_VECTOR_BYTES 32
#include "conv_loops.inc"
