#!/usr/bin/env bash
# An installed dlperf keeps finding the libraries it was linked against outside the system's
# library path (MPI, HDF5, CUDA, cuDNN, NCCL from Spack or module prefixes) with an empty
# LD_LIBRARY_PATH: install the build to a temporary prefix, then for every installed program
# the RUNPATH must hold each directory the build-tree binary's RUNPATH names outside the build
# tree (CMAKE_INSTALL_RPATH_USE_LINK_PATH), must name nothing inside the build tree, and ldd
# in an empty environment must resolve every library.
#   install_rpath_test.sh CMAKE_COMMAND BUILD_DIR
# Exit 77 (skipped) when every linked library is in a system directory (nothing to check).
set -euo pipefail
cmake_exe=$1
build=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
"$cmake_exe" --install "$build" --prefix "$prefix" >"$tmp/install.log"

runpath() { readelf -d "$1" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]$/\2/p' | tr ':' '\n' | sed '/^$/d'; }
checked=0 bad=0
for exe in "$prefix"/bin/dlperf-*; do
  name=$(basename "$exe")
  built=$(find "$build" -type f -name "$name" -perm -u+x | head -1)
  [ -n "$built" ] || { echo "$name: not found in $build" >&2; exit 1; }
  mapfile -t want < <(runpath "$built" | grep -v "^$build\(/\|$\)" || true)
  mapfile -t have < <(runpath "$exe")
  echo "$name: build tree needs ${want[*]:-nothing}; installed RUNPATH ${have[*]:-(none)}"
  for d in "${want[@]}"; do
    checked=$((checked + 1))
    printf '%s\n' "${have[@]}" | grep -qxF "$d" || { echo "$name: installed RUNPATH lacks $d" >&2; bad=1; }
  done
  for d in "${have[@]}"; do
    case $d in "$build"|"$build"/*) echo "$name: installed RUNPATH names the build tree: $d" >&2; bad=1 ;; esac
  done
  if env -i /usr/bin/ldd "$exe" | grep 'not found'; then echo "$name: unresolved libraries with an empty environment" >&2; bad=1; fi
done
[ $bad -eq 0 ] || exit 1
if [ $checked -eq 0 ]; then echo "every linked library is in a system directory: nothing to check; skipped"; exit 77; fi
echo "installed programs keep $checked library directories in their RUNPATH: ok"
