#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 (bookworm) or Debian 13 (trixie), so that a
# package installed by hand on a developer's or CI's machine can never hide a missing install step:
#   1. a minimal root of the suite (mmdebstrap --variant=minbase: Essential and Priority:required
#      packages only; no compiler, no apt lists) from the mirror this machine's apt uses when it
#      has that suite, else from deb.debian.org (suite + suite-updates + suite-security), kept as
#      a tarball in the cache, one per suite and sources, rebuilt when older than
#      DLPERF_FRESH_MAX_AGE_DAYS;
#   2. a fresh copy of it with this checkout's files (tracked and untracked-but-not-ignored:
#      no build directories, no results) in /src;
#   3. inside it, as root with an empty environment: `scripts/quickstart.sh` (small settings
#      through its documented variables) and `scripts/run-tests.sh`, exactly as the README
#      gives them; every package they need must come from scripts/setup-debian.sh;
#   4. a test CTest skipped there fails this check unless it only skips for lack of hardware:
#      a GPU (label `cuda`) or a CPU instruction set (label `hardware`, e.g. the AMX kernel
#      check on a CPU without AMX): a skip is how a missing tool would otherwise go unnoticed.
# CUDA, cuDNN and NCCL are not Debian packages: /usr/local/cuda is bind-mounted read-only, so
# the CUDA backend is compiled as it is on CI. Everything runs in a private mount and PID
# namespace (unshare): the mounts (/proc, /sys, /dev, /dev/pts, /dev/shm, /run, CUDA) and the
# daemons the tests start (munged, slurmctld, slurmd, MPI) end with it, on success, failure or
# Ctrl-C; the root is deleted afterwards unless DLPERF_FRESH_KEEP=1.
#
#   scripts/check-fresh-machine.sh [--suite bookworm|trixie] [--refresh]
#       (as root; default bookworm = Debian 12, trixie = Debian 13; --refresh rebuilds the cached root)
# Environment:
#   DLPERF_FRESH_CACHE         cache directory for the root tarball (~/.cache/dlperf)
#   DLPERF_FRESH_MAX_AGE_DAYS  rebuild the cached root when older (7): security updates flow in
#   DLPERF_FRESH_SOURCES       apt sources for the root (default: this machine's Debian sources
#                              when they name the suite, else deb.debian.org)
#   DLPERF_FRESH_WORKDIR       where the root is unpacked (/var/tmp; needs about 8 GB)
#   DLPERF_FRESH_KEEP=1        keep the root afterwards, for a look inside (chroot DIR bash)
#   DLPERF_FRESH_ROOT=DIR      iterate in a root kept before (DIR as the KEEP message names it)
#                              instead of a fresh one: its /src is refreshed from the checkout
#                              (builds kept), packages already installed stay; not a fresh check
#   DLPERF_FRESH_STEPS         "quickstart tests" (default), or one of them; or "bench": the
#                              release's PyTorch (scripts/setup-debian.sh --bench), a Release
#                              build in /src/build, then DLPERF_FRESH_BENCH; what it writes
#                              under /tmp/bench comes back to DLPERF_FRESH_BENCH_OUT
#   DLPERF_FRESH_BENCH         the bench command, run in /src (default: bench/vs_pytorch.sh
#                              --log-dir /tmp/bench): Debian 13's PyTorch 2.6 as the yardstick
#                              on a Debian 12 host
#   DLPERF_FRESH_BENCH_OUT     where /tmp/bench is copied (default: ./fresh-bench-SUITE)
#   DLPERF_FRESH_CTEST_ARGS    extra ctest arguments for run-tests.sh, e.g. "-L 'numerics|cli|mpi'"
#   IMAGE BATCH ITERS WARMUP REPEATS   quickstart.sh's settings (default here: 64 4 6 2 2)
# Exit: 0 both commands passed, 1 one failed (its output says which), 2 cannot run here.
set -euo pipefail
say() { printf 'fresh-root [%s]: %s\n' "$(date +%T)" "$*"; }
die() { echo "fresh-root: $*" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
cache=${DLPERF_FRESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf}
max_age=${DLPERF_FRESH_MAX_AGE_DAYS:-7}
workdir=${DLPERF_FRESH_WORKDIR:-/var/tmp}
steps=${DLPERF_FRESH_STEPS:-quickstart tests}
refresh=0 suite=bookworm
usage() { echo "usage: $0 [--suite bookworm|trixie] [--refresh]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --refresh) refresh=1 ;;
    --suite) [ $# -ge 2 ] || usage; suite=$2; shift ;;
    --suite=*) suite=${1#--suite=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
  esac
  shift
done
case $suite in
  bookworm) release="Debian 12" ;;
  trixie) release="Debian 13" ;;
  *) echo "fresh-root: --suite: unknown suite '$suite' (bookworm, trixie)" >&2; exit 2 ;;
esac
for s in $steps; do
  case $s in quickstart|tests|bench) ;; *) echo "fresh-root: DLPERF_FRESH_STEPS: unknown step '$s' (quickstart, tests, bench)" >&2; exit 2 ;; esac
done

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap, chroot, mounts); run it as root"
# This check's own tools on the host (CI starts from a fresh Debian 12 too); not the project's.
# (mmdebstrap on a Debian 12 host builds a Debian 13 root too: debian-archive-keyring has its keys.)
missing=()
for t in mmdebstrap:mmdebstrap git:git unshare:util-linux chroot:coreutils tar:tar; do
  command -v "${t%%:*}" >/dev/null || missing+=("${t#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing this check's tools on the host: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get update -q >/dev/null || ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
    die "cannot install ${missing[*]}"
  fi
fi
t_start=$SECONDS

# ---- 1. the cached minimal root -----------------------------------------------------------
# The root's apt sources: this machine's Debian ones (the same mirror and snapshot) when they are
# for this suite, or Debian's: a Debian 12 host builds a Debian 13 root from deb.debian.org.
sources=${DLPERF_FRESH_SOURCES:-}
if [ -z "$sources" ]; then
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [ -s "$f" ] && grep -q "^[^#]*\\b$suite\\b" "$f"; then sources=$f; break; fi
  done
fi
mirror_args=()
if [ -n "$sources" ]; then
  [ -r "$sources" ] || die "DLPERF_FRESH_SOURCES=$sources is not a readable file"
  mirror_args=("$sources")  # mmdebstrap reads a sources.list or deb822 .sources file given as MIRROR
  key=$(sha256sum "$sources" | cut -c1-12)
else
  mirror_args=("deb http://deb.debian.org/debian $suite main"
               "deb http://deb.debian.org/debian $suite-updates main"
               "deb http://deb.debian.org/debian-security $suite-security main")
  key=$(printf '%s\n' "${mirror_args[@]}" | sha256sum | cut -c1-12)
fi
mkdir -p "$cache"
tarball=$cache/$suite-minbase-$key.tar
if [ $refresh -eq 1 ] || [ ! -s "$tarball" ] || [ -n "$(find "$tarball" -mtime "+$max_age" 2>/dev/null)" ]; then
  say "building a minimal $release root from ${sources:-deb.debian.org} (mmdebstrap --variant=minbase)"
  t0=$SECONDS
  rm -f "$tarball.tmp"
  mmdebstrap --quiet --variant=minbase --mode=root --format=tar "$suite" "$tarball.tmp" "${mirror_args[@]}" ||
    { rm -f "$tarball.tmp"; echo "fresh-root: mmdebstrap failed" >&2; exit 2; }
  mv "$tarball.tmp" "$tarball"
  say "root cached in $tarball ($(du -h "$tarball" | cut -f1), $((SECONDS - t0)) s)"
else
  say "using the cached root $tarball (built $(date -r "$tarball" +%F); --refresh rebuilds it)"
fi

# ---- 2. a fresh copy with the checkout in /src ----------------------------------------------
mkdir -p "$workdir"
reuse=${DLPERF_FRESH_ROOT:-}
if [ -n "$reuse" ]; then
  [ -d "$reuse/src" ] && [ -x "$reuse/bin/bash" ] || die "DLPERF_FRESH_ROOT=$reuse is not a root kept by this script"
  root=$(cd "$reuse" && pwd) top=$(dirname "$root")
else
  top=$(mktemp -d "$workdir/dlperf-fresh.XXXXXX")
  root=$top/root
fi
ns_pid=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  # The namespace's PID 1 takes every process inside with it, and its mounts vanish with it.
  if [ -n "$ns_pid" ] && kill -0 "$ns_pid" 2>/dev/null; then
    kill -TERM "$ns_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$ns_pid" 2>/dev/null
    wait "$ns_pid" 2>/dev/null
  fi
  if grep -qF " $top/" /proc/self/mountinfo; then
    # Never reached with the private mount namespace; never delete through a bind mount of /dev.
    echo "fresh-root: something is still mounted under $top: left in place" >&2
    grep -F " $top/" /proc/self/mountinfo >&2
  elif [ "${DLPERF_FRESH_KEEP:-0}" = 1 ] || [ -n "$reuse" ]; then
    echo "fresh-root: root kept in $root (DLPERF_FRESH_KEEP=1): chroot $root bash; rm -rf $top when done" >&2
  else
    rm -rf --one-file-system "$top"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "$reuse" ]; then
  mkdir -p "$root"
  tar -C "$root" -xf "$tarball"
  mkdir -p "$root/src"
else
  say "reusing the kept root $root (DLPERF_FRESH_ROOT): not a fresh-machine check"
fi
# What a fresh clone has: tracked files plus untracked ones git does not ignore (new files not
# committed yet), as they are in the working tree. No build directories, no .git.
git -C "$src" ls-files -z --cached --others --exclude-standard |
  tar -C "$src" --no-recursion --ignore-failed-read --null --files-from=- -cf - | tar -C "$root/src" -xf -
# A machine's own network identity: name resolution for apt, and loopback names.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" >"$root/etc/hosts"
cuda_real=
if [ -d /usr/local/cuda ]; then
  cuda_real=$(readlink -f /usr/local/cuda)
  mkdir -p "$root$cuda_real"
  [ -L /usr/local/cuda ] && ln -sfn "$cuda_real" "$root/usr/local/cuda"
  say "CUDA: $cuda_real bind-mounted read-only (not a Debian package)"
else
  say "no /usr/local/cuda here: the CUDA backend is not built in the root"
fi

# ---- 3. inside: private mounts, chroot, the README's commands --------------------------------
# The quickstart's settings, small: full ResNet-50 depth, tiny images and few iterations.
qs_env=("IMAGE=${IMAGE:-64}" "BATCH=${BATCH:-4}" "ITERS=${ITERS:-6}" "WARMUP=${WARMUP:-2}" "REPEATS=${REPEATS:-2}")
inner=$(cat <<'INNER'
set -euo pipefail
root=$1 cuda_real=$2 steps=$3 ctest_args=$4 bench_cmd=$5
shift 5
# The root a mount point of its own, as / is on any machine or container: /proc/self/mountinfo
# inside a chroot lists only mounts under the chroot, so a plain directory would have no "/"
# (the disk-full message names the mount point from it).
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"   # MPI's shared memory, not the host's
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
mkdir -p -m 1777 "$root/run/lock"
if [ -n "$cuda_real" ]; then
  mount --bind "$cuda_real" "$root$cuda_real"
  mount -o remount,bind,ro "$root$cuda_real"
fi
run_in_root() {  # an empty environment, as a fresh login has
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
rc=0
for step in $steps; do
  t0=$SECONDS
  case $step in
    quickstart)
      echo "fresh-root: == scripts/quickstart.sh ($*)"
      run_in_root "$@" /bin/bash -c 'cd /src && scripts/quickstart.sh' || rc=$?
      ;;
    tests)
      echo "fresh-root: == scripts/run-tests.sh"
      # shellcheck disable=SC2086  # ctest_args: words, as given
      run_in_root /bin/bash -c "cd /src && scripts/run-tests.sh build-tests $ctest_args" 2>&1 | tee "$root/tmp/run-tests.log" || rc=$?  # pipefail
      ;;
    bench)
      echo "fresh-root: == bench: scripts/setup-debian.sh --bench, a Release build in /src/build, then: $bench_cmd"
      mkdir -p "$root/tmp/bench"
      run_in_root /bin/bash -c "cd /src && scripts/setup-debian.sh --bench &&
        cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDLPERF_CUDA=OFF -DDLPERF_BUILD_TESTS=OFF >/tmp/bench/configure.log &&
        cmake --build build -j \$(nproc) >/tmp/bench/build.log && $bench_cmd" 2>&1 | tee "$root/tmp/bench/bench.log" || rc=$?
      ;;
  esac
  echo "fresh-root: == $step: exit $rc, $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || break
done
umount -R "$root$cuda_real" 2>/dev/null || true
umount -R "$root/run" "$root/dev/shm" 2>/dev/null || true
umount -R "$root/dev" "$root/sys" "$root/proc" 2>/dev/null || true
exit $rc
INNER
)
say "running the README's commands in $root"
# --kill-child: if this script dies, the namespace's PID 1 is killed, and with it everything.
unshare --mount --pid --fork --kill-child --propagation private \
  /bin/bash -c "$inner" fresh-root "$root" "$cuda_real" "$steps" "${DLPERF_FRESH_CTEST_ARGS:-}" \
  "${DLPERF_FRESH_BENCH:-bench/vs_pytorch.sh --log-dir /tmp/bench}" "${qs_env[@]}" &
ns_pid=$!
rc=0
wait "$ns_pid" || rc=$?
ns_pid=
if [[ " $steps " == *" bench "* ]] && [ -d "$root/tmp/bench" ]; then
  bench_out=${DLPERF_FRESH_BENCH_OUT:-$PWD/fresh-bench-$suite}
  mkdir -p "$bench_out" && cp -r "$root/tmp/bench/." "$bench_out/" && say "bench output in $bench_out"
fi
if [ $rc -ne 0 ]; then
  echo "fresh-root: FAILED in the fresh root (exit $rc) after $((SECONDS - t_start)) s; a command or package" \
       "missing from scripts/setup-debian.sh shows up like this" >&2
  exit 1
fi

# ---- 4. skips: only tests that need a GPU or an instruction set may skip in the root -------------------------------
if [[ " $steps " == *" tests "* ]]; then
  skipped=$(sed -n 's/^[[:space:]]*[0-9]\+ - \([^ ]*\) (Skipped)$/\1/p' "$root/tmp/run-tests.log" | sort -u)
  gpu_only=$(chroot "$root" /usr/bin/ctest --test-dir /src/build-tests -N -L '^(cuda|hardware)$' 2>/dev/null |
             sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p' | sort -u)
  unexpected=$(comm -23 <(printf '%s\n' "$skipped" | sed '/^$/d') <(printf '%s\n' "$gpu_only" | sed '/^$/d'))
  if [ -n "$unexpected" ]; then
    echo "fresh-root: FAILED: these tests skipped in the fresh root but may only skip for lack of a GPU or an ISA" \
         "(a tool or package missing from scripts/setup-debian.sh --tests?):" >&2
    mapfile -t names <<<"$unexpected"
    printf '  %s\n' "${names[@]}" >&2
    exit 1
  fi
  say "skipped in the root (labels cuda, hardware: no GPU, or an ISA this CPU lacks): $(tr '\n' ' ' <<<"$skipped")"
fi
say "passed: ${steps// / and } on a fresh $release in $((SECONDS - t_start)) s"
