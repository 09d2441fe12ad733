#!/usr/bin/env bash
# The modulefiles as a cluster user meets them: install the build to a temporary prefix, then
# in a fresh shell with Debian's Lmod, `module use` the Lua tree (and then the Tcl tree),
# `module load dlperf`, and check dlperf-train resolves into the prefix and runs; `module
# help`/`whatis` work and `module unload` takes it off PATH again. Then the dependency list
# (DLPERF_MODULE_DEPENDS): modulefiles written for two stand-in site modules load them first,
# in order, and unload them with dlperf; an installed build loads exactly its configured list.
#   modules_test.sh CMAKE_COMMAND BUILD_DIR VERSION SOURCE_DIR
# Exit 77 (CTest: skipped) when Lmod is not installed.
set -euo pipefail
cmake_exe=$1
build=$2
version=$3
src=$4
lmod_init=/usr/share/lmod/lmod/init/bash
[ -r "$lmod_init" ] || { echo "Lmod not installed (scripts/setup-debian.sh --tests installs it); skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
"$cmake_exe" --install "$build" --prefix "$prefix" >"$tmp/install.log"
lua=$prefix/share/modulefiles/lua/dlperf/$version.lua
tcl=$prefix/share/modulefiles/tcl/dlperf/$version
if [ ! -f "$lua" ] || [ ! -f "$tcl" ]; then echo "modulefiles not installed:" >&2; cat "$tmp/install.log" >&2; exit 1; fi
grep -q "local prefix = \"$prefix\"" "$lua"
grep -q "set prefix \"$prefix\"" "$tcl"
grep -q '@' "$lua" "$tcl" && { echo "unfilled @VARIABLE@ in a modulefile" >&2; exit 1; }
[ -x "$prefix/share/dlperf/jobs/rn50_4n8g.sh" ]

for tree in lua tcl; do
  echo "== $tree modulefile"
  # shellcheck disable=SC2016  # the inner script gets its values as $1..$4
  # A clean login-like shell: no inherited module state, the prefix not on PATH.
  env -i HOME="$tmp" USER="$(id -un)" PATH=/usr/bin:/bin LMOD_ALLOW_ROOT_USE=yes bash --norc --noprofile -c '
    set -euo pipefail
    . "$1"
    module use "$2/share/modulefiles/$3"
    module load dlperf
    exe=$(command -v dlperf-train)
    [ "$exe" = "$2/bin/dlperf-train" ] || { echo "dlperf-train resolves to $exe, not $2/bin" >&2; exit 1; }
    dlperf-train --version
    dlperf-train --version | grep -q "^dlperf-train $4 "
    command -v dlperf-reduce dlperf-jobs >/dev/null
    case ":$MANPATH:" in *":$2/share/man:"*) ;; *) echo "MANPATH lacks $2/share/man: $MANPATH" >&2; exit 1 ;; esac
    [ "$DLPERF_ROOT" = "$2" ] && [ -d "$DLPERF_JOBS" ]
    module whatis dlperf 2>&1 | grep -q "Version: $4"
    module help dlperf 2>&1 | grep -q "dlperf-jobs"
    module list 2>&1 | grep -q "dlperf/$4"
    module unload dlperf
    if command -v dlperf-train >/dev/null; then echo "dlperf-train still on PATH after unload" >&2; exit 1; fi
    echo "$3 modulefile ok"
  ' modules-test "$lmod_init" "$prefix" "$tree" "$version"
done

echo "== dependencies: DLPERF_MODULE_DEPENDS"
# The installed files load exactly what the build was configured with.
configured=$(sed -n 's/^DLPERF_MODULE_DEPENDS:[A-Z]*=//p' "$build/CMakeCache.txt")
want=$(tr ';' ' ' <<<"$configured" | wc -w)
[ "$(grep -c '^depends_on(' "$lua")" -eq "$want" ] || { echo "$lua: not $want depends_on lines for '$configured'" >&2; cat "$lua" >&2; exit 1; }
[ "$(grep -c '^module load ' "$tcl")" -eq "$want" ] || { echo "$tcl: not $want module load lines for '$configured'" >&2; exit 1; }
# Two stand-in site modules, and dlperf modulefiles that depend on them.
mkdir -p "$tmp/site/fakempi" "$tmp/site/fakecuda"
printf 'setenv("FAKEMPI_ROOT", "/opt/fakempi")\nprepend_path("LD_LIBRARY_PATH", "/opt/fakempi/lib")\n' >"$tmp/site/fakempi/4.1.lua"
printf 'setenv("FAKECUDA_ROOT", "/opt/fakecuda")\n' >"$tmp/site/fakecuda/12.4.lua"
"$cmake_exe" -DDLPERF_PREFIX="$prefix" -DDLPERF_VERSION="$version" -DDLPERF_MODULE_DEPENDS="fakempi/4.1;fakecuda" \
  -DDLPERF_MODULEFILES_DIR="$tmp/deps" -P "$src/modules/modulefiles.cmake"
if "$cmake_exe" -DDLPERF_PREFIX=/x -DDLPERF_VERSION=1 "-DDLPERF_MODULE_DEPENDS=ok;bad\"name" -DDLPERF_MODULEFILES_DIR="$tmp/bad" \
     -P "$src/modules/modulefiles.cmake" >"$tmp/bad.log" 2>&1; then
  echo "a module name with a quote was accepted" >&2; exit 1
fi
grep -q "is not a module name" "$tmp/bad.log"
for tree in lua tcl; do
  # shellcheck disable=SC2016  # the inner script gets its values as $1..$4
  env -i HOME="$tmp" USER="$(id -un)" PATH=/usr/bin:/bin LMOD_ALLOW_ROOT_USE=yes bash --norc --noprofile -c '
    set -euo pipefail
    . "$1"
    module use "$2/site"
    module use "$2/deps/$3"
    module load dlperf
    [ "${FAKEMPI_ROOT:-}" = /opt/fakempi ] && [ "${FAKECUDA_ROOT:-}" = /opt/fakecuda ] ||
      { echo "$3: loading dlperf did not load its dependencies"; module list; exit 1; } >&2
    loaded=$(module -t list 2>&1 | grep -E "^(fakempi|fakecuda|dlperf)" | tr "\n" " ")
    [ "$loaded" = "fakempi/4.1 fakecuda/12.4 dlperf/$4 " ] || { echo "$3: loaded in the wrong order: $loaded" >&2; exit 1; }
    [ "$(command -v dlperf-train)" = "$5/bin/dlperf-train" ]
    module unload dlperf
    [ -z "${FAKEMPI_ROOT:-}" ] && [ -z "${FAKECUDA_ROOT:-}" ] ||
      { echo "$3: unloading dlperf left its dependencies loaded"; module list; exit 1; } >&2
    echo "$3 modulefile loads and unloads its dependencies: ok"
  ' modules-test "$lmod_init" "$tmp" "$tree" "$version" "$prefix"
done
