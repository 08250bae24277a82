#!/usr/bin/env bash
# The installed CMake package, used by another project as the README says:
#   1. README.md's "Using the C++ API" code block must be, byte for byte, the lines of
#      tests/consumer/main.cpp between its "README snippet" markers;
#   2. the release build's package (`cmake --install --component Development`: headers, static
#      libraries, CMake files) goes into a temporary prefix;
#   3. tests/consumer — find_package(lmtrain REQUIRED), target_link_libraries(app lmtrain::lmtrain),
#      and every installed header in one translation unit — is configured and built against that
#      prefix alone; `app` trains W1 with the snippet and fails when the MSE exceeds its bound;
#   4. find_package(lmtrain REQUIRED COMPONENTS …) finds the components the install has, and fails
#      naming the component for an unknown one and for one the install lacks (MPI, in a copy of
#      the package whose config says it was built without).
# Builds only the libraries it installs; configures build/release first when it is not yet.
# Run by scripts/test.sh after the release tests; runs on its own as well.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
work=$(mktemp -d "${TMPDIR:-/tmp}/lmtrain-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "consumer test FAILED: $*" >&2
  exit 1
}

# Runs "$@" with its output in $work/<name>.log, shown when it fails.
logged() {
  local name=$1
  shift
  if ! "$@" >"$work/$name.log" 2>&1; then
    tail -n 40 "$work/$name.log" >&2
    return 1
  fi
}

# 1. The README's snippet is main.cpp's.  README.md marks the code block with an HTML comment
# naming tests/consumer/main.cpp on the line before its ```cpp fence.
awk '/^<!-- .*tests\/consumer\/main\.cpp/ { state = 1; next }
     state == 1 && /^```cpp$/ { state = 2; next }
     state == 2 && /^```$/ { exit }
     state == 2 { print }' README.md >"$work/readme-snippet.cpp"
awk '/^\/\/ README snippet: end$/ { exit }
     in_snippet { print }
     /^\/\/ README snippet: begin$/ { in_snippet = 1 }' tests/consumer/main.cpp >"$work/main-snippet.cpp"
[[ -s $work/readme-snippet.cpp ]] ||
  fail "README.md: no \`\`\`cpp block after a '<!-- … tests/consumer/main.cpp … -->' marker"
[[ -s $work/main-snippet.cpp ]] ||
  fail "tests/consumer/main.cpp: no '// README snippet: begin' … '// README snippet: end' region"
if ! cmp -s "$work/readme-snippet.cpp" "$work/main-snippet.cpp"; then
  diff -u --label README.md "$work/readme-snippet.cpp" --label tests/consumer/main.cpp \
    "$work/main-snippet.cpp" >&2 || true
  fail "README.md's C++ snippet and tests/consumer/main.cpp differ; make them the same"
fi
echo "consumer: README.md's snippet is tests/consumer/main.cpp's ($(wc -l <"$work/main-snippet.cpp") lines)"

# 2. The package alone, from the release build.
[[ -f build/release/CMakeCache.txt ]] || logged configure-lmtrain cmake --preset release
logged build-lmtrain cmake --build --preset release -j "$jobs" --target lmtrain lmtrain_io ||
  fail "building lmtrain"
prefix=$work/prefix
logged install cmake --install build/release --prefix "$prefix" --component Development ||
  fail "cmake --install"
config=$(find "$prefix" -name lmtrainConfig.cmake)
[[ -n $config ]] || fail "no lmtrainConfig.cmake under $prefix"

# 3. The consumer project against that prefix.
logged configure cmake -S tests/consumer -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" || fail "configuring tests/consumer (find_package(lmtrain))"
grep -q "^lmtrain_DIR:PATH=$prefix/" "$work/consumer/CMakeCache.txt" ||
  fail "tests/consumer found another lmtrain: $(grep '^lmtrain_DIR' "$work/consumer/CMakeCache.txt")"
grep -o 'lmtrain [0-9.]* in .*' "$work/configure.log" | sed "s|$work|<tmp>|; s/^/consumer: /"
logged build cmake --build "$work/consumer" -j "$jobs" || fail "building tests/consumer"
logged app "$work/consumer/app" || fail "tests/consumer/app (W1 through the README's snippet)"
grep '^consumer:' "$work/app.log"

# 4. Components.
have=(io)
for component in MPI CUDA NCCL; do
  grep -q "^set(lmtrain_HAVE_$component ON)$" "$config" && have+=("$component")
done
components() {  # <log name> <prefix> <components>
  cmake -S tests/consumer/components -B "$work/$1" -DCMAKE_PREFIX_PATH="$2" \
    "-DLMTRAIN_COMPONENTS=$3" >"$work/$1.log" 2>&1
}
says() {  # <log name> <text>: the log contains the text, however CMake wrapped its lines
  tr -s ' \n' '  ' <"$work/$1.log" | grep -qF "$2"
}
components components-present "$prefix" "$(IFS=';' && echo "${have[*]}")" ||
  { tail -n 20 "$work/components-present.log" >&2; fail "COMPONENTS ${have[*]} (the install has them)"; }
if components components-unknown "$prefix" "io;Bogus"; then fail "COMPONENTS Bogus was accepted"; fi
says components-unknown "Bogus is not a component of lmtrain" ||
  { cat "$work/components-unknown.log" >&2; fail "COMPONENTS Bogus: no message naming it"; }
no_mpi=$work/no-mpi
no_mpi_config=$no_mpi/${config#"$prefix"/}
mkdir -p "$(dirname "$no_mpi_config")"
cp "$(dirname "$config")"/*.cmake "$(dirname "$no_mpi_config")/"
sed -i 's/^set(lmtrain_HAVE_MPI ON)$/set(lmtrain_HAVE_MPI OFF)/' "$no_mpi_config"
grep -q '^set(lmtrain_HAVE_MPI OFF)$' "$no_mpi_config" ||
  fail "lmtrainConfig.cmake has no 'set(lmtrain_HAVE_MPI ON|OFF)' line"
if components components-no-mpi "$no_mpi" "MPI"; then
  fail "COMPONENTS MPI was accepted by a package built without MPI"
fi
says components-no-mpi "was built without MPI (install libopenmpi-dev" ||
  { cat "$work/components-no-mpi.log" >&2; fail "COMPONENTS MPI without MPI: no message saying so"; }
echo "consumer: COMPONENTS ${have[*]} found; Bogus, and MPI from an install without it, refused"
echo "consumer: passed"
