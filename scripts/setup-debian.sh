#!/usr/bin/env bash
# Installs the Debian 12 (bookworm) or Debian 13 (trixie) packages dlperf builds and tests with,
# by the release named in /etc/os-release (oneDNN 2.6 on Debian 12, 3.7 on 13). As root it runs apt-get;
# otherwise it prints the exact command to run and exits 2. CUDA, cuDNN and NCCL are not
# Debian packages: when /usr/local/cuda has them the CUDA backend is built too.
#   scripts/setup-debian.sh            build and run
#   scripts/setup-debian.sh --tests    also what the test suite needs (GoogleTest; Slurm, munge, Lmod and
#                                      python3-yaml for the jobs and slurm suites; iproute2 and
#                                      python3-h5py for the multinode suite's namespaces and checks;
#                                      librsvg2-bin to render the plot)
#   scripts/setup-debian.sh --bench    also the CPU yardstick of bench/: the release's PyTorch
#                                      (1.13 on Debian 12, 2.6 on 13) with torchvision and a
#                                      threaded OpenBLAS (both options may be given)
# libjpeg-turbo comes as two packages: the libjpeg API (decoding) and TurboJPEG (encoding).
set -euo pipefail

codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
case $codename in
  bookworm|trixie) ;;
  *) echo "setup: Debian 12 (bookworm) or 13 (trixie) expected; /etc/os-release says '${codename:-nothing}':" \
          "install the packages below by hand or use Spack (spack.yaml)" >&2 ;;
esac

packages=(build-essential cmake pkg-config git
          libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
          libboost-program-options-dev nlohmann-json3-dev libjpeg62-turbo-dev libturbojpeg0-dev
          libhwloc-dev)
for opt in "$@"; do
  case $opt in
    --tests)
      packages+=(libgtest-dev googletest slurm-wlm munge lmod python3-yaml iproute2 python3-h5py)
      # rsvg-convert: the analysis suite renders dlperf-reduce's SVG plot to a PNG with librsvg.
      packages+=(librsvg2-bin)
      ;;
    --bench)
      # libopenblas0-pthread: Debian's torch otherwise links the reference BLAS for what it
      # does not hand to oneDNN.
      packages+=(python3-torch python3-torchvision libopenblas0-pthread)
      ;;
    *) echo "setup: unknown option '$opt' (--tests, --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages present"
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages; run as root:" >&2
  echo "  apt-get update && $cmd" >&2
  exit 2
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends ${missing[*]} >/dev/null
echo "setup: done"
