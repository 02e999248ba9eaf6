# What `cmake --install` puts where (GNU layout under CMAKE_INSTALL_PREFIX): the programs (each
# target installs itself; python/ installs its tools), blockmm-job beside them, the Slurm scripts
# in share/blockmm/slurm, the license and the docs in share/doc/blockmm, and for every installed
# tool a man page and a bash completion, both made at build time from the tool's own --help:
# the page by help2man with the tool's docs/man/<tool>.h2m (EXAMPLES, ENVIRONMENT, SEE ALSO;
# skipped with a note when help2man is missing), the completion by cmake/GenerateCompletion.cmake.
# Included after python/, whose tools it runs (their --help needs BLOCKMM_PYTHON).
include(GNUInstallDirs)

install(PROGRAMS "${PROJECT_SOURCE_DIR}/jobs/slurm/blockmm-job" DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS "${PROJECT_SOURCE_DIR}/jobs/slurm/cpu.sbatch" "${PROJECT_SOURCE_DIR}/jobs/slurm/single-gpu.sbatch"
                 "${PROJECT_SOURCE_DIR}/jobs/slurm/gpus.sbatch"
        DESTINATION ${CMAKE_INSTALL_DATADIR}/blockmm/slurm)
install(FILES "${PROJECT_SOURCE_DIR}/jobs/slurm/README.md" DESTINATION ${CMAKE_INSTALL_DATADIR}/blockmm/slurm)
file(GLOB _blockmm_docs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" "${PROJECT_SOURCE_DIR}/README.md" "${PROJECT_SOURCE_DIR}/CHANGELOG.md"
              "${PROJECT_SOURCE_DIR}/CITATION.cff" ${_blockmm_docs}
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Every installed tool: "name|what it is (the man page's NAME line)|how to run it|what it depends on".
file(GLOB _blockmm_python_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/python/blockmm/*.py")
set(_blockmm_tools
    "blockmm|exact block-sparse matrix product C = A x B|$<TARGET_FILE:blockmm>|blockmm"
    "blockmm-gen|random block-sparse input matrices for blockmm|$<TARGET_FILE:blockmm-gen>|blockmm-gen"
    "blockmm-cmp|compare two block-sparse matrix files as matrices|$<TARGET_FILE:blockmm-cmp>|blockmm-cmp"
    "blockmm-info|describe a block-sparse matrix file|$<TARGET_FILE:blockmm-info>|blockmm-info"
    "blockmm-convert|convert block-sparse matrices between COL380 binary and HDF5|$<TARGET_FILE:blockmm-convert>|blockmm-convert"
    "blockmm-job|the checks around the srun line of blockmm's Slurm scripts|${PROJECT_SOURCE_DIR}/jobs/slurm/blockmm-job|${PROJECT_SOURCE_DIR}/jobs/slurm/blockmm-job")
if(BLOCKMM_PYTHON)
  foreach(_entry "blockmm-import|convert Matrix Market and scipy .npz files into blockmm inputs"
                 "blockmm-export|convert blockmm files into Matrix Market or scipy .npz"
                 "blockmm-spy|draw the block pattern of a matrix as a PNG")
    string(REPLACE "|" ";" _pair "${_entry}")
    list(GET _pair 0 _tool)
    list(GET _pair 1 _what)
    string(REPLACE ";" "," _depends "${PROJECT_BINARY_DIR}/${_tool};${_blockmm_python_sources}")
    list(APPEND _blockmm_tools "${_tool}|${_what}|${PROJECT_BINARY_DIR}/${_tool}|${_depends}")
  endforeach()
else()
  message(STATUS "no python3 with numpy and scipy: no man pages or completion for blockmm-import, -export, -spy")
endif()

find_program(BLOCKMM_HELP2MAN help2man)
set(BLOCKMM_MAN_PAGES OFF)
if(NOT BLOCKMM_FUZZING)  # fuzzing builds install nothing
  if(BLOCKMM_HELP2MAN)
    set(BLOCKMM_MAN_PAGES ON)
  else()
    message(STATUS "help2man not found: no man pages (Debian: apt-get install help2man)")
  endif()
  set(_blockmm_generated "")
  set(_blockmm_man_pages "")
  set(_blockmm_completions "")
  foreach(_entry IN LISTS _blockmm_tools)
    string(REPLACE "|" ";" _fields "${_entry}")
    list(GET _fields 0 _tool)
    list(GET _fields 1 _what)
    list(GET _fields 2 _program)
    list(GET _fields 3 _depends)
    string(REPLACE "," ";" _depends "${_depends}")
    set(_include "${PROJECT_SOURCE_DIR}/docs/man/${_tool}.h2m")
    set(_completion "${PROJECT_BINARY_DIR}/completion/${_tool}")
    add_custom_command(OUTPUT "${_completion}"
      COMMAND ${CMAKE_COMMAND} -DTOOL=${_tool} -DPROGRAM=${_program} -DOUT=${_completion}
              -P "${PROJECT_SOURCE_DIR}/cmake/GenerateCompletion.cmake"
      DEPENDS ${_depends} "${PROJECT_SOURCE_DIR}/cmake/GenerateCompletion.cmake"
      COMMENT "bash completion: ${_tool}"
      VERBATIM)
    list(APPEND _blockmm_generated "${_completion}")
    list(APPEND _blockmm_completions "${_completion}")
    if(BLOCKMM_MAN_PAGES)
      set(_page "${PROJECT_BINARY_DIR}/man/${_tool}.1")
      # --no-discard-stderr: a tool that prints its help on stderr still gets a page. The
      # environment keeps a build under an MPI launcher from starting MPI for --help.
      add_custom_command(OUTPUT "${_page}"
        COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/man"
        COMMAND ${CMAKE_COMMAND} -E env BLOCKMM_MPI=0 ${BLOCKMM_HELP2MAN} --no-info --no-discard-stderr
                "--name=${_what}" "--version-string=${PROJECT_VERSION}" "--include=${_include}"
                --output "${_page}" "${_program}"
        DEPENDS ${_depends} "${_include}"
        COMMENT "help2man: ${_tool}.1"
        VERBATIM)
      list(APPEND _blockmm_generated "${_page}")
      list(APPEND _blockmm_man_pages "${_page}")
    endif()
  endforeach()
  add_custom_target(blockmm_man_pages ALL DEPENDS ${_blockmm_generated})
  install(FILES ${_blockmm_completions} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
  if(BLOCKMM_MAN_PAGES)
    install(FILES ${_blockmm_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endif()
