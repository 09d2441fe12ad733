# Finds every dependency through CMake's own find modules or the packages' config files.
# Required: MPI, oneDNN, HDF5 (C), Boost.Program_options, hwloc, OpenMP, Threads, nlohmann-json
# (header-only, dlperf-reduce's baseline JSON reader), libjpeg-turbo (libjpeg API for decoding,
# TurboJPEG for encoding the synthetic dataset).
# Optional (DLPERF_CUDA=AUTO): CUDA Toolkit with cuBLAS, cuDNN and NCCL -> the CUDA backend.

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(dnnl CONFIG REQUIRED)
set(DLPERF_DNNL_VERSION ${dnnl_VERSION})
# The oneDNN backend builds against the 3.x API (Debian 13's 3.7, Spack's default) and the 2.x one
# from 2.6 (Debian 12's 2.6.3): src/backend/onednn/dnnl_compat.h is the one seam between them. A
# later major may change the API again: say so here rather than with hundreds of compile errors.
if(dnnl_VERSION VERSION_LESS 2.6 OR NOT dnnl_VERSION VERSION_LESS 4)
  message(FATAL_ERROR "oneDNN ${dnnl_VERSION} found (${dnnl_DIR}); dlperf needs oneDNN 2.6 to 3.x "
                      "(Debian 12's or 13's libdnnl-dev, or Spack's onednn@2.6:3): set dnnl_DIR to one")
endif()
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(Boost REQUIRED COMPONENTS program_options)
find_package(nlohmann_json 3.2 REQUIRED)
# hwloc (>= 2): the node's topology, for pinning ranks to cores and describing the node. Through
# its pkg-config file, which Debian's libhwloc-dev and Spack's hwloc both install; dlperf_hwloc
# is the one name the rest of the build links.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc>=2.0)
add_library(dlperf_hwloc INTERFACE)
target_link_libraries(dlperf_hwloc INTERFACE PkgConfig::HWLOC)

# libjpeg-turbo: both of its APIs, found by header and library (its CMake config needs the
# static libraries too, which distributions ship separately). Debian: libjpeg62-turbo-dev and
# libturbojpeg0-dev; Spack: libjpeg-turbo.
find_path(JPEG_TURBO_INCLUDE_DIR turbojpeg.h)
find_path(JPEG_LIB_INCLUDE_DIR jpeglib.h)
find_library(JPEG_TURBO_LIBRARY turbojpeg)
find_library(JPEG_LIB_LIBRARY NAMES jpeg)
find_file(JPEG_CONFIG_HEADER jconfig.h HINTS ${JPEG_LIB_INCLUDE_DIR} PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE})
set(DLPERF_JPEG_FOUND FALSE)
set(DLPERF_JPEG_VERSION "")
if(JPEG_TURBO_INCLUDE_DIR AND JPEG_LIB_INCLUDE_DIR AND JPEG_TURBO_LIBRARY AND JPEG_LIB_LIBRARY AND JPEG_CONFIG_HEADER)
  file(STRINGS ${JPEG_CONFIG_HEADER} _jv REGEX "^#define LIBJPEG_TURBO_VERSION ")
  string(REGEX REPLACE "^#define LIBJPEG_TURBO_VERSION +([0-9.]+).*" "\\1" DLPERF_JPEG_VERSION "${_jv}")
  if(DLPERF_JPEG_VERSION VERSION_LESS 2.0)
    message(FATAL_ERROR "libjpeg-turbo >= 2.0 is needed (jpeg_crop_scanline, jpeg_skip_scanlines); found '${DLPERF_JPEG_VERSION}' "
                        "in ${JPEG_CONFIG_HEADER}")
  endif()
  set(DLPERF_JPEG_FOUND TRUE)
  add_library(dlperf_jpeg INTERFACE)
  target_include_directories(dlperf_jpeg SYSTEM INTERFACE ${JPEG_TURBO_INCLUDE_DIR} ${JPEG_LIB_INCLUDE_DIR})
  target_link_libraries(dlperf_jpeg INTERFACE ${JPEG_LIB_LIBRARY} ${JPEG_TURBO_LIBRARY})
else()
  message(FATAL_ERROR "libjpeg-turbo not found (jpeglib.h: ${JPEG_LIB_INCLUDE_DIR}, turbojpeg.h: ${JPEG_TURBO_INCLUDE_DIR}, "
                      "libjpeg: ${JPEG_LIB_LIBRARY}, libturbojpeg: ${JPEG_TURBO_LIBRARY}). Debian: apt-get install libjpeg62-turbo-dev "
                      "libturbojpeg0-dev (scripts/setup-debian.sh); Spack: libjpeg-turbo; or set CMAKE_PREFIX_PATH")
endif()

# dnnl 2.x exports DNNL::dnnl; keep one name for the rest of the build.
if(TARGET DNNL::dnnl)
  set(DLPERF_DNNL_TARGET DNNL::dnnl)
elseif(TARGET dnnl)
  set(DLPERF_DNNL_TARGET dnnl)
else()
  message(FATAL_ERROR "oneDNN was found but exports neither DNNL::dnnl nor dnnl")
endif()

# HDF5 as an imported target (FindHDF5 of CMake 3.25 gives variables, newer ones give hdf5::hdf5).
if(NOT TARGET dlperf_hdf5)
  add_library(dlperf_hdf5 INTERFACE)
  target_include_directories(dlperf_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(dlperf_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
  target_compile_definitions(dlperf_hdf5 INTERFACE ${HDF5_DEFINITIONS} ${HDF5_C_DEFINITIONS})
endif()

# ---- CUDA backend -----------------------------------------------------------------------
set(DLPERF_WITH_CUDA OFF)
set(DLPERF_CUDA_REASON "disabled by DLPERF_CUDA=OFF")
if(NOT DLPERF_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  set(_cuda_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR} /usr/local/cuda $ENV{CUDNN_ROOT} $ENV{NCCL_ROOT})
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cuda_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn HINTS ${_cuda_hints} PATH_SUFFIXES lib64 lib)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_cuda_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${_cuda_hints} PATH_SUFFIXES lib64 lib)
  set(_missing "")
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND _missing "nvcc")
  endif()
  if(NOT CUDAToolkit_FOUND)
    list(APPEND _missing "CUDA Toolkit")
  elseif(NOT TARGET CUDA::cublas OR NOT TARGET CUDA::cublasLt)
    list(APPEND _missing "cuBLAS")
  elseif(CUDAToolkit_VERSION VERSION_LESS 12.0)
    # cudaGraphInstantiate's three-argument form (CUDA 12): an older toolkit fails mid-build.
    list(APPEND _missing "CUDA 12 or newer (found ${CUDAToolkit_VERSION})")
  endif()
  if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
    list(APPEND _missing "cuDNN")
  endif()
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    list(APPEND _missing "NCCL")
  else()
    # ncclConfig_t, ncclCommInitRankConfig and non-blocking communicators (NCCL 2.14).
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defines REGEX "^#define NCCL_(MAJOR|MINOR) +[0-9]+")
    string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _nccl_major "${_nccl_defines}")
    string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _nccl_minor "${_nccl_defines}")
    if(_nccl_major MATCHES "^[0-9]+$" AND _nccl_minor MATCHES "^[0-9]+$" AND "${_nccl_major}.${_nccl_minor}" VERSION_LESS 2.14)
      list(APPEND _missing "NCCL 2.14 or newer (found ${_nccl_major}.${_nccl_minor} in ${NCCL_INCLUDE_DIR})")
    endif()
  endif()
  if(_missing)
    string(REPLACE ";" ", " _missing "${_missing}")
    set(DLPERF_CUDA_REASON "not found: ${_missing}")
    if(DLPERF_CUDA STREQUAL "ON")
      message(FATAL_ERROR "DLPERF_CUDA=ON but ${DLPERF_CUDA_REASON}; set CUDNN_ROOT/NCCL_ROOT or DLPERF_CUDA=AUTO")
    endif()
  else()
    # A100 and H100 (CUDA 13 dropped V100's sm_70); without this, CUDA 13 builds for sm_75.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES 80 90 CACHE STRING "CUDA architectures" FORCE)
    endif()
    enable_language(CUDA)
    # Device code is C++17: CMake 3.25 cannot ask nvcc 13 for C++20, and kernels need no more.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(DLPERF_WITH_CUDA ON)
    set(DLPERF_CUDA_REASON "CUDA ${CUDAToolkit_VERSION}, cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY}")
    add_library(dlperf_cuda_deps INTERFACE)
    target_include_directories(dlperf_cuda_deps SYSTEM INTERFACE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
    target_link_libraries(dlperf_cuda_deps INTERFACE CUDA::cudart CUDA::cublas CUDA::cublasLt ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
  endif()
endif()

# ---- nvJPEG (--decoder gpu) -------------------------------------------------------------
# Part of the CUDA toolkit, but packaged separately by some distributions (pip wheels, minimal
# toolkits); without it the CUDA backend is still built, and --decoder gpu says it is missing.
set(DLPERF_WITH_NVJPEG OFF)
set(DLPERF_NVJPEG_REASON "no CUDA backend")
if(DLPERF_WITH_CUDA)
  find_path(NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NVJPEG_ROOT} PATH_SUFFIXES include)
  find_library(NVJPEG_LIBRARY nvjpeg HINTS ${_cuda_hints} $ENV{NVJPEG_ROOT} PATH_SUFFIXES lib64 lib)
  if(NVJPEG_INCLUDE_DIR AND NVJPEG_LIBRARY)
    set(DLPERF_WITH_NVJPEG ON)
    set(DLPERF_NVJPEG_REASON "${NVJPEG_LIBRARY}")
    add_library(dlperf_nvjpeg INTERFACE)
    target_include_directories(dlperf_nvjpeg SYSTEM INTERFACE ${NVJPEG_INCLUDE_DIR})
    target_link_libraries(dlperf_nvjpeg INTERFACE ${NVJPEG_LIBRARY} CUDA::cudart)
  else()
    set(DLPERF_NVJPEG_REASON "not found: nvjpeg.h or libnvjpeg (set NVJPEG_ROOT); --decoder gpu unavailable")
  endif()
endif()
