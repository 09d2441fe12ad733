#!/usr/bin/env bash
# The test command (README; CI runs exactly this, in fresh Debian 13 and 12 roots built by
# scripts/check-fresh-machine.sh): install what is missing, configure with warnings as errors
# (the CUDA backend too, whenever CUDA, cuDNN and NCCL are found), build everything, run the
# whole CTest suite.
#   scripts/run-tests.sh [BUILD_DIR] [extra ctest arguments]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-tests}
shift || true

"$root/scripts/setup-debian.sh" --tests
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLPERF_WERROR=ON -DDLPERF_BUILD_TESTS=ON
cmake --build "$build" -j"$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$build" --output-on-failure --timeout 900 "$@"
