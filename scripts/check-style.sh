#!/usr/bin/env bash
# How the code reads, checked (shared/STYLE.md, issue 13):
#   * clang-format (the checked-in .clang-format) leaves every C++ and CUDA source as it is;
#   * no function in src/ or include/ is longer than 150 lines or has a cyclomatic complexity
#     over 40 (lizard, from PyPI, in the tools environment build/tools-venv);
#   * every Python file compiles with warnings as errors (a SyntaxWarning such as "'str' object
#     is not callable; perhaps you missed a comma?" is a crash waiting in a branch no test takes:
#     bench/report.py's W5 table crashed on the H200 of 2026-11-27 that way).
# Exits non-zero, listing the offenders, when any fails.
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

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t python < <(git ls-files '*.py' '*.pyi')
else
  mapfile -t python < <(find python bench examples scripts tests \( -name '*.py' -o -name '*.pyi' \) \
                          -type f | sort)
fi
/usr/bin/python3 -W error - "${python[@]}" <<'EOF'
"""Compiles each file given (nothing is run or written); warnings are errors."""
import sys

bad = 0
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    try:
        compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, SyntaxWarning) as e:
        print(f"check-style: {path}:{getattr(e, 'lineno', '?')}: {e.__class__.__name__}: {e}",
              file=sys.stderr)
        bad += 1
if bad:
    sys.exit(f"check-style: {bad} Python file(s) do not compile cleanly")
print(f"check-style: python: {len(sys.argv) - 1} files compile with warnings as errors")
EOF
