# Writes the dlperf modulefiles for one install prefix: run by `cmake --install` (see
# modules/CMakeLists.txt) and by tests/jobs/modules_test.sh, as
#   cmake -DDLPERF_PREFIX=P -DDLPERF_VERSION=V -DDLPERF_GIT_REVISION=R
#         -DDLPERF_MODULE_DEPENDS="openmpi/4.1;cuda" -DDLPERF_MODULEFILES_DIR=D -P modulefiles.cmake
# D/lua/dlperf/V.lua (Lmod) and D/tcl/dlperf/V (Tcl: Environment Modules, or Lmod).
# DLPERF_MODULE_DEPENDS: modules loaded before dlperf, in order (a CMake list; blanks also
# separate), so that the MPI, CUDA, cuDNN, NCCL and HDF5 dlperf was built with are there at
# run time (mpirun/srun, and the libraries for a site that links against module prefixes).
# Lua uses depends_on(): Lmod loads them with dlperf and unloads them with it unless the user
# loaded them too. Tcl uses `module load`, which Environment Modules 3.2 to 5 and Lmod all read.
cmake_minimum_required(VERSION 3.24)
foreach(_v DLPERF_PREFIX DLPERF_VERSION DLPERF_MODULEFILES_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "modulefiles.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(NOT DEFINED DLPERF_GIT_REVISION)
  set(DLPERF_GIT_REVISION unknown)
endif()
string(REPLACE " " ";" _deps "${DLPERF_MODULE_DEPENDS}")
list(REMOVE_ITEM _deps "")
set(DLPERF_LUA_DEPENDS "")
set(DLPERF_TCL_DEPENDS "")
foreach(_m IN LISTS _deps)
  if(NOT _m MATCHES "^[A-Za-z0-9_.+/@:-]+$")
    message(FATAL_ERROR "DLPERF_MODULE_DEPENDS: '${_m}' is not a module name (letters, digits, _ . + / @ : -)")
  endif()
  string(APPEND DLPERF_LUA_DEPENDS "depends_on(\"${_m}\")\n")
  string(APPEND DLPERF_TCL_DEPENDS "module load ${_m}\n")
endforeach()
if(_deps)
  string(REPLACE ";" " " DLPERF_MODULE_DEPENDS_TEXT "${_deps}")
else()
  set(DLPERF_MODULE_DEPENDS_TEXT "none (DLPERF_MODULE_DEPENDS)")
  set(DLPERF_LUA_DEPENDS "-- none: configure with -DDLPERF_MODULE_DEPENDS=\"openmpi/4.1;cuda;...\" to load them here\n")
  set(DLPERF_TCL_DEPENDS "# none: configure with -DDLPERF_MODULE_DEPENDS=\"openmpi/4.1;cuda;...\" to load them here\n")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/dlperf.lua.in ${DLPERF_MODULEFILES_DIR}/lua/dlperf/${DLPERF_VERSION}.lua @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/dlperf.tcl.in ${DLPERF_MODULEFILES_DIR}/tcl/dlperf/${DLPERF_VERSION} @ONLY)
