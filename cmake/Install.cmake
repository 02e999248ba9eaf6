# What `cmake --install` puts where (GNU layout under CMAKE_INSTALL_PREFIX): the programs
# (each target installs itself), blockmm-job beside them, the Slurm scripts in
# share/blockmm/slurm, man pages made from --help by help2man at build time (skipped with a
# note when help2man is missing), bash completion, and the license and docs.
include(GNUInstallDirs)

set(_blockmm_programs blockmm blockmm-gen blockmm-cmp blockmm-info blockmm-convert)

install(PROGRAMS "${PROJECT_SOURCE_DIR}/jobs/slurm/blockmm-job" DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS "${PROJECT_SOURCE_DIR}/jobs/slurm/cpu.sbatch" "${PROJECT_SOURCE_DIR}/jobs/slurm/single-gpu.sbatch"
                 "${PROJECT_SOURCE_DIR}/jobs/slurm/gpus.sbatch"
        DESTINATION ${CMAKE_INSTALL_DATADIR}/blockmm/slurm)
install(FILES "${PROJECT_SOURCE_DIR}/jobs/slurm/README.md" DESTINATION ${CMAKE_INSTALL_DATADIR}/blockmm/slurm)
foreach(_program IN LISTS _blockmm_programs)
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/blockmm-completion.bash"
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ${_program})
endforeach()
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" "${PROJECT_SOURCE_DIR}/README.md" "${PROJECT_SOURCE_DIR}/CHANGELOG.md"
              "${PROJECT_SOURCE_DIR}/CITATION.cff"
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

find_program(BLOCKMM_HELP2MAN help2man)
if(BLOCKMM_HELP2MAN AND NOT BLOCKMM_FUZZING)  # fuzzing builds install nothing
  set(_blockmm_man_pages "")
  set(_blockmm_man_names
      "blockmm|exact block-sparse matrix product C = A x B"
      "blockmm-gen|random block-sparse input matrices for blockmm"
      "blockmm-cmp|compare two block-sparse COL380 files as matrices"
      "blockmm-info|describe a block-sparse COL380 file"
      "blockmm-convert|convert block-sparse matrices between COL380 binary and HDF5")
  foreach(_entry IN LISTS _blockmm_man_names)
    string(REPLACE "|" ";" _pair "${_entry}")
    list(GET _pair 0 _program)
    list(GET _pair 1 _what)
    set(_page "${PROJECT_BINARY_DIR}/man/${_program}.1")
    # --no-discard-stderr: a tool that prints its help on stderr still gets a page. The
    # environment keeps a build under an MPI launcher from starting MPI for --help.
    add_custom_command(OUTPUT "${_page}"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/man"
      COMMAND ${CMAKE_COMMAND} -E env BLOCKMM_MPI=0 ${BLOCKMM_HELP2MAN} --no-info --no-discard-stderr
              "--name=${_what}" "--version-string=${PROJECT_VERSION}" --output "${_page}" $<TARGET_FILE:${_program}>
      DEPENDS ${_program}
      COMMENT "help2man: ${_program}.1"
      VERBATIM)
    list(APPEND _blockmm_man_pages "${_page}")
  endforeach()
  add_custom_target(blockmm_man_pages ALL DEPENDS ${_blockmm_man_pages})
  install(FILES ${_blockmm_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  set(BLOCKMM_MAN_PAGES ON)
else()
  message(STATUS "help2man not found: no man pages (Debian: apt-get install help2man)")
  set(BLOCKMM_MAN_PAGES OFF)
endif()
