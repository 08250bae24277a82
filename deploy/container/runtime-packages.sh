#!/bin/sh
# Prints the Debian packages that own the shared libraries which the binaries and Python
# extensions under DIR load, one a line: what the runtime stage of deploy/container/*Containerfile
# installs, so that its list is read off the build and cannot drift from it.  Not listed: glibc,
# libstdc++ and libgcc (every Debian-family image has them), libraries under DIR itself (numpy's
# vendored OpenBLAS), and libraries no package owns (the CUDA base image's own, which its runtime
# stage already has).  Exits non-zero when a library is not found at all.
#
# usage: runtime-packages.sh DIR        (run in the build stage, where the libraries are installed)
set -eu
dir=$1
libraries=$(find "$dir" -type f \( -name '*.so' -o -name '*.so.*' -o -perm -u+x \) \
  -exec sh -c 'for f; do ldd "$f" 2>/dev/null || true; done' sh {} +)
# A wheel's vendored libraries (scipy.libs/…) find each other through their loader's RPATH, which
# ldd of one of them alone does not see: "not found" counts only for names nowhere under DIR.
missing=$(printf '%s\n' "$libraries" | awk '/=> not found/ {print $1}' | sort -u |
  while read -r name; do [ -n "$(find "$dir" -name "$name" -print -quit)" ] || echo "$name"; done)
if [ -n "$missing" ]; then
  printf '%s\n' "$missing" >&2
  echo "runtime-packages.sh: the libraries above are not found" >&2
  exit 1
fi
printf '%s\n' "$libraries" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    real=$(realpath "$lib")
    case $real in "$dir"/*) continue ;; esac
    # Debian 12 merged /lib into /usr/lib, but dpkg still knows some files by their /lib path.
    dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "$lib" 2>/dev/null ||
      true
  done | cut -d: -f1 | sort -u | grep -vxE 'libc6|libstdc\+\+6|libgcc-s1' || true
