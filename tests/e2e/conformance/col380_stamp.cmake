# cmake -DDATA=DIR -DOUT=HEADER -P col380_stamp.cmake: writes HEADER holding the bytes of
# DIR/pairs.tsv (or saying it is absent), and touches it only when that changed. The conformance
# test includes it, so a build after the data appears (../shared added beside a checkout) or
# changes recompiles the test and gtest_discover_tests lists the pairs again; the test also
# compares the data it finds at run time with these bytes (conformance_test.cpp). Runs at every
# build (a custom target), where it costs one cmake start.
if(NOT DEFINED DATA OR NOT DEFINED OUT)
  message(FATAL_ERROR "usage: cmake -DDATA=DIR -DOUT=HEADER -P col380_stamp.cmake")
endif()
set(present 0)
set(bytes "")
if(EXISTS "${DATA}/pairs.tsv" AND NOT IS_DIRECTORY "${DATA}/pairs.tsv")
  set(present 1)
  file(READ "${DATA}/pairs.tsv" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
endif()
file(WRITE "${OUT}.new"
     "// Made by tests/e2e/conformance/col380_stamp.cmake at build time from ${DATA}/pairs.tsv.\n"
     "#pragma once\n"
     "constexpr bool kCol380PresentAtBuild = ${present};\n"
     "constexpr unsigned char kCol380PairsAtBuild[] = {${bytes}0};  // pairs.tsv, then a 0\n")
execute_process(COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${OUT}.new" "${OUT}" RESULT_VARIABLE rc)
file(REMOVE "${OUT}.new")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "col380_stamp.cmake: cannot write ${OUT}")
endif()
