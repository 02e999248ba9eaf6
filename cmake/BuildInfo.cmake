# What `blockmm --version` reports about this build: version, git commit (captured when CMake
# configures, so a rebuild without re-configuring keeps the old commit), CUDA, MPI and HDF5.
# Writes build_info.hpp into the build tree; src/driver includes it.
set(BLOCKMM_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${PROJECT_SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE _blockmm_commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _blockmm_git_rc)
  if(_blockmm_git_rc EQUAL 0 AND _blockmm_commit)
    set(BLOCKMM_GIT_COMMIT "${_blockmm_commit}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${PROJECT_SOURCE_DIR}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE _blockmm_dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_blockmm_dirty)
      string(APPEND BLOCKMM_GIT_COMMIT "-modified")
    endif()
  endif()
endif()

if(BLOCKMM_ENABLE_CUDA)
  set(BLOCKMM_BUILD_CUDA 1)
  set(BLOCKMM_BUILD_CUDA_VERSION "${CUDAToolkit_VERSION}")
  set(BLOCKMM_BUILD_CUDA_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(BLOCKMM_BUILD_CUDA 0)
  set(BLOCKMM_BUILD_CUDA_VERSION "")
  set(BLOCKMM_BUILD_CUDA_ARCHS "")
endif()
set(BLOCKMM_BUILD_HDF5_VERSION "${HDF5_VERSION}")
if(HDF5_IS_PARALLEL)
  set(BLOCKMM_BUILD_HDF5_PARALLEL 1)
else()
  set(BLOCKMM_BUILD_HDF5_PARALLEL 0)
endif()

configure_file("${CMAKE_CURRENT_LIST_DIR}/build_info.hpp.in" "${PROJECT_BINARY_DIR}/generated/build_info.hpp" @ONLY)
