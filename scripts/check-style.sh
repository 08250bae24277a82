#!/usr/bin/env bash
# How the code reads, checked (shared/STYLE.md, issue 13):
#   * clang-format (the checked-in .clang-format) leaves every C++ and CUDA source as it is;
#   * no function in src/ or include/ is longer than 150 lines or has a cyclomatic complexity
#     over 40 (lizard, from PyPI, in the tools environment build/tools-venv).
# Exits non-zero, listing the offenders, when either fails.
set -euo pipefail
cd "$(dirname "$0")/.."

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.inc')
else
  mapfile -t sources < <(find src include tests bench examples fuzz \( -name '*.cpp' -o -name '*.h' \
                           -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) -type f | sort)
fi
unformatted=()
for f in "${sources[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if ((${#unformatted[@]})); then
  echo "check-style: clang-format would change ${#unformatted[@]} file(s); run clang-format -i on:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check-style: clang-format: ${#sources[@]} files as formatted"

venv=build/tools-venv
if [[ ! -x $venv/bin/lizard ]]; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check lizard==1.24.3
fi
long=$("$venv/bin/lizard" -l cpp src include -C 40 -L 150 -w || true)
if [[ -n $long ]]; then
  echo "check-style: functions over 150 lines or complexity 40 (split them):" >&2
  echo "$long" >&2
  exit 1
fi
echo "check-style: lizard: no function in src/ or include/ over 150 lines or complexity 40"
