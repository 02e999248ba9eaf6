# Whether to build the CUDA backend, and for which GPUs, when the command line does not say
# (docs/building.md, "CUDA"). nvcc for two architectures on a machine without a GPU was most of
# the quick start's build (issue 53), so the default is:
#   - asked for (-DBLOCKMM_ENABLE_CUDA=ON, CMAKE_CUDA_ARCHITECTURES or CUDAARCHS given, the h100
#     preset): built, for the architectures named, else sm_80 and sm_90;
#   - not asked for, nvcc found and a GPU here (nvidia-smi): built for this machine's GPUs only;
#   - otherwise: not built, and the configure log says how to ask for it (a login node that
#     builds for GPU nodes must).
# Sets BLOCKMM_ENABLE_CUDA (an option) and, where CUDA is built, CMAKE_CUDA_ARCHITECTURES.
include(CheckLanguage)

# _blockmm_local_gpu_architectures(VAR): this machine's GPUs as CUDA architectures ("90"), "" without one.
function(_blockmm_local_gpu_architectures var)
  set(archs "")
  find_program(_blockmm_nvidia_smi nvidia-smi NO_CACHE)
  if(_blockmm_nvidia_smi)
    execute_process(COMMAND "${_blockmm_nvidia_smi}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 30)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" arch "${cap}")
        list(APPEND archs "${arch}")
      endforeach()
      list(REMOVE_DUPLICATES archs)
    else()
      # A driver too old to report compute_cap: a GPU all the same, of an architecture not known here.
      execute_process(COMMAND "${_blockmm_nvidia_smi}" -L OUTPUT_VARIABLE gpus RESULT_VARIABLE rc ERROR_QUIET
                      TIMEOUT 30)
      if(rc EQUAL 0 AND gpus MATCHES "GPU [0-9]+:")
        set(archs "80;90")
      endif()
    endif()
  endif()
  set(${var} "${archs}" PARENT_SCOPE)
endfunction()

check_language(CUDA)
set(_blockmm_cuda_asked OFF)
if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
  set(_blockmm_cuda_asked ON)
endif()
set(_blockmm_local_archs "")
if(CMAKE_CUDA_COMPILER)
  _blockmm_local_gpu_architectures(_blockmm_local_archs)
endif()
if(CMAKE_CUDA_COMPILER AND (_blockmm_cuda_asked OR _blockmm_local_archs))
  set(_blockmm_cuda_default ON)
else()
  set(_blockmm_cuda_default OFF)
endif()
set(_blockmm_cuda_given OFF)
if(DEFINED CACHE{BLOCKMM_ENABLE_CUDA})  # on the command line, or chosen by an earlier configure
  set(_blockmm_cuda_given ON)
endif()
option(BLOCKMM_ENABLE_CUDA
       "Build the CUDA backend (default: when nvcc and a GPU are here, or CUDA architectures are given)"
       ${_blockmm_cuda_default})

if(BLOCKMM_ENABLE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    # This machine's GPUs; else the chips blockmm is tuned for (CUDA 13 dropped pre-Turing
    # targets, and "native" fails without a GPU).
    if(_blockmm_local_archs)
      set(CMAKE_CUDA_ARCHITECTURES ${_blockmm_local_archs} CACHE STRING "CUDA architectures")
    else()
      set(CMAKE_CUDA_ARCHITECTURES 80 90 CACHE STRING "CUDA architectures")
    endif()
  endif()
elseif(CMAKE_CUDA_COMPILER AND NOT _blockmm_cuda_asked AND NOT _blockmm_cuda_given)
  message(STATUS "CUDA backend: not built (nvcc found, but no GPU here); to build it for GPU nodes: "
                 "-DBLOCKMM_ENABLE_CUDA=ON, or the h100 preset (docs/building.md)")
endif()
