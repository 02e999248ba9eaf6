# blockmm_find_python(VAR "module, module...") sets VAR to the first python3 that imports the
# modules (Debian's /usr/bin/python3 first: a pyenv shim on the PATH may lack them), or to "".
function(blockmm_find_python var modules)
  find_program(_blockmm_path_python3 NAMES python3)
  set(found "")
  foreach(candidate /usr/bin/python3 ${_blockmm_path_python3})
    if(NOT found AND EXISTS "${candidate}")
      execute_process(COMMAND "${candidate}" -c "import ${modules}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(found "${candidate}")
      endif()
    endif()
  endforeach()
  set(${var} "${found}" PARENT_SCOPE)
endfunction()

# BLOCKMM_PYTHON (cache): the interpreter of the Python tools and of blockmm.multiply's extension,
# one that imports numpy and scipy, Debian's first (a pyenv shim on the PATH may lack them).
macro(blockmm_choose_python)
  set(BLOCKMM_PYTHON "" CACHE FILEPATH "python3 with numpy and scipy for the Python tools (empty: search)")
  if(NOT BLOCKMM_PYTHON)
    blockmm_find_python(_blockmm_found_python "numpy, scipy.sparse, scipy.io")
    if(_blockmm_found_python)
      set(BLOCKMM_PYTHON "${_blockmm_found_python}" CACHE FILEPATH "python3 with numpy and scipy for the Python tools" FORCE)
    endif()
  endif()
endmacro()
