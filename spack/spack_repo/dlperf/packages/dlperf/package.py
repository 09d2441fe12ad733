# Spack recipe for dlperf, kept in the repository so `spack install` in this checkout's
# environment (spack.yaml, `develop: dlperf path: .`) builds the working tree. Spack 1.x
# package API (v2.0): build systems come from the builtin repository's spack_repo package,
# directives from spack.package.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Dlperf(CMakePackage, CudaPackage):
    """Native C++ deep-learning training benchmarks for clusters: ResNet-50 v1.5, VGG16 and
    BERT-base on oneDNN (CPU) or cuDNN/cuBLAS/NCCL (CUDA), MPI-launched, HDF5 traces, the
    DLPerf measurement method, and generated Slurm job scripts."""

    homepage = "https://github.com/dlperf/dlperf"
    git = "https://github.com/dlperf/dlperf.git"

    maintainers("dlperf")

    version("main", branch="main")

    variant("tests", default=False, description="Build the CTest suites (needs GoogleTest)")

    # Each lower bound is the minimum cmake/DlperfDependencies.cmake (and CMakeLists.txt)
    # checks, so Spack never picks a version the build refuses (tests/jobs/spack_yaml_test.py).
    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.24:", type="build")  # cmake_minimum_required
    depends_on("pkgconfig", type="build")  # hwloc is found through its hwloc.pc
    depends_on("mpi")
    depends_on("hdf5@1.10:~mpi")  # the C library; one writer per job, no parallel HDF5 (Debian 12: 1.10)
    depends_on("boost@1.74:+program_options")  # Debian 12's Boost
    # oneDNN 2.6 (the oldest tested; Debian 12 ships 2.7) to 3.x (Debian 13: 3.7, Spack's
    # default): the CPU backend builds against both (issue 23).
    depends_on("onednn@2.6:3 cpu_runtime=omp")
    depends_on("hwloc@2.0:")  # topology: core pinning, the node's description
    depends_on("nlohmann-json@3.2:")  # dlperf-reduce's JSON input and output
    depends_on("libjpeg-turbo@2.0:")  # libjpeg API (jpeg_crop_scanline) and TurboJPEG
    depends_on("googletest", type=("build", "test"), when="+tests")

    with when("+cuda"):
        depends_on("cuda@12:")  # cudaGraphInstantiate's three-argument form
        depends_on("cudnn@8.9:")  # the legacy cuDNN API, present in 8.9 and 9
        depends_on("nccl@2.14:+cuda")  # ncclConfig_t, ncclCommInitRankConfig (non-blocking init)
        for arch in CudaPackage.cuda_arch_values:
            depends_on(f"nccl cuda_arch={arch}", when=f"cuda_arch={arch}")

    conflicts("+cuda cuda_arch=none", msg="set cuda_arch, e.g. cuda_arch=80 (A100) or 90 (H100)")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("DLPERF_CUDA", "ON" if spec.satisfies("+cuda") else "OFF"),
            self.define_from_variant("DLPERF_BUILD_TESTS", "tests"),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", ";".join(spec.variants["cuda_arch"].value)))
        return args

    def setup_run_environment(self, env):
        env.set("DLPERF_JOBS", self.prefix.share.dlperf.jobs)
