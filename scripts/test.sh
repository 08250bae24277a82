#!/usr/bin/env bash
# Installs dependencies, builds lmtrain and runs every test:
#   1. the optimized build (all tests, including the W1 convergence runs), then
#   2. the AddressSanitizer + UndefinedBehaviorSanitizer build (all but the convergence runs,
#      which take minutes under the sanitizers).
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

scripts/install-deps.sh

echo "== release build and tests"
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

echo "== sanitizer build (ASan + UBSan) and tests"
cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs" -LE convergence
