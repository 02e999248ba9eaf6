# blockmm_e2e_discover_tests(TARGET LABEL TIMEOUT [EXTRA_ENV "NAME=value"...])
#
# Registers the GoogleTest cases of TARGET with CTest (label, timeout, run serially for mpi)
# and gives every case the BLOCKMM_TEST_ENV environment plus EXTRA_ENV.
#
# gtest_discover_tests (CMake 3.25 here) keeps only the first item of a list-valued property:
# PROPERTIES ENVIRONMENT "${BLOCKMM_TEST_ENV}" sets BLOCKMM_BIN alone. So the environment is
# set from an include file that CTest reads after the discovered tests, on the test list that
# gtest_discover_tests publishes (its TEST_LIST variable).
include_guard(GLOBAL)

function(blockmm_e2e_discover_tests target label timeout)
  cmake_parse_arguments(PARSE_ARGV 3 ARG "RUN_SERIAL" "" "EXTRA_ENV")
  set(properties LABELS ${label} TIMEOUT ${timeout})
  if(ARG_RUN_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 TEST_LIST ${target}_TESTS PROPERTIES ${properties})
  set(environment ${BLOCKMM_TEST_ENV} ${ARG_EXTRA_ENV})
  set(env_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_environment.cmake")
  file(GENERATE OUTPUT "${env_file}" CONTENT
    "if(${target}_TESTS)\n  set_tests_properties(\${${target}_TESTS} PROPERTIES ENVIRONMENT \"${environment}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${env_file}")
endfunction()

# blockmm_e2e_mpiexec_flags(OUT): MPIEXEC_PREFLAGS plus --oversubscribe where mpiexec is Open
# MPI's (more ranks than cores needs it, and only Open MPI knows the flag), space-separated for
# an environment variable.
function(blockmm_e2e_mpiexec_flags out)
  set(flags ${MPIEXEC_PREFLAGS})
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE version ERROR_QUIET)
  if(version MATCHES "Open MPI|OpenRTE")
    list(APPEND flags --oversubscribe)
  endif()
  list(JOIN flags " " flags)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()
