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

# blockmm_describe_python(VAR PYTHON): VAR = "Python 3.11.2 with numpy 1.24.2, scipy 1.10.1, h5py
# 3.7.0, matplotlib 3.6.3" (a package PYTHON lacks: "no h5py"), for the configure log.
function(blockmm_describe_python var python)
  execute_process(COMMAND "${python}" -c [=[
import importlib, importlib.metadata, sys
found = []
for name in ("numpy", "scipy", "h5py", "matplotlib"):
    try:
        found.append(f"{name} {importlib.metadata.version(name)}")
    except Exception:  # Debian's python3-h5py registers no metadata under that name
        try:
            found.append(f"{name} {importlib.import_module(name).__version__}")
        except Exception:
            found.append(f"no {name}")
print(f"Python {sys.version.split()[0]} with {', '.join(found)}")
]=] OUTPUT_VARIABLE text OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    set(text "a Python that did not say its version")
  endif()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()
