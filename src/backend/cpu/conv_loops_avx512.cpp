// The direct convolution kernel compiled for AVX-512 (16 floats per register; conv_loops.h).
#define LMTRAIN_ISA avx512
#define LMTRAIN_VECTOR_BYTES 64
#include "conv_loops.inc"
