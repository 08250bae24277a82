# Libraries that lmtrain links by file rather than through a CMake package (OpenBLAS, LAPACKE,
# NCCL), as imported targets.  lmtrain is a static library, so a consumer of the installed package
# links them too: the build includes this file to define the targets it links, and the installed
# lmtrainConfig.cmake includes its installed copy to define the same targets on the consumer's
# machine, so that the export names a target (lmtrain::OpenBLAS) instead of a path that only
# existed where lmtrain was built.

# lmtrain_import_library(<target> <cache variable> NAMES <name>... ADVICE <text>
#                        [HINTS <dir>...] [PATH_SUFFIXES <suffix>...])
#
# Finds the library into <cache variable> (left alone when already set, so -D<variable>=<path>
# chooses another file) and defines the UNKNOWN IMPORTED <target> for it.  When nothing is found,
# appends "<variable> (<ADVICE>)" to the list _lmtrain_missing_libraries in the caller's scope and
# defines no target; the caller decides whether that is fatal (the build) or makes the package
# "not found" (lmtrainConfig.cmake).
function(lmtrain_import_library target variable)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "ADVICE" "NAMES;HINTS;PATH_SUFFIXES")
  find_library(${variable} NAMES ${arg_NAMES} HINTS ${arg_HINTS} PATH_SUFFIXES ${arg_PATH_SUFFIXES}
               DOC "Library file for ${target} (lmtrain)")
  if(NOT ${variable})
    list(APPEND _lmtrain_missing_libraries "lib${arg_NAMES} for ${target} (${arg_ADVICE})")
    set(_lmtrain_missing_libraries "${_lmtrain_missing_libraries}" PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${variable}}")
  endif()
endfunction()

# OpenBLAS (the OpenMP build: Debian installs it as an alternative behind libopenblas.so) and
# LAPACKE, as lmtrain::OpenBLAS and lmtrain::LAPACKE.  <hint directories> are searched first.
macro(lmtrain_import_linear_algebra)
  lmtrain_import_library(lmtrain::OpenBLAS OPENBLAS_LIBRARY NAMES openblas HINTS ${ARGN}
    ADVICE "install libopenblas-openmp-dev, or set OPENBLAS_LIBRARY to the library file")
  lmtrain_import_library(lmtrain::LAPACKE LAPACKE_LIBRARY NAMES lapacke HINTS ${ARGN}
    ADVICE "install liblapacke-dev, or set LAPACKE_LIBRARY to the library file")
endmacro()

# NCCL's libnccl as lmtrain::NCCL, looked for in <hint directories> (the CUDA toolkit's first).
macro(lmtrain_import_nccl)
  lmtrain_import_library(lmtrain::NCCL NCCL_LIBRARY NAMES nccl HINTS ${ARGN}
    PATH_SUFFIXES lib64 lib
    ADVICE "install NCCL (libnccl-dev or NVIDIA's package), or set NCCL_LIBRARY to the library file")
endmacro()

# ScaLAPACK built for OpenMPI (Debian's libscalapack-openmpi-dev) as lmtrain::ScaLAPACK: the
# distributed normal matrix of CPU ranks (solver.linear_solver = "distributed_cholesky").
macro(lmtrain_import_scalapack)
  lmtrain_import_library(lmtrain::ScaLAPACK SCALAPACK_LIBRARY NAMES scalapack-openmpi HINTS ${ARGN}
    ADVICE "install libscalapack-openmpi-dev, or set SCALAPACK_LIBRARY to the library file")
endmacro()
