# Writes the bash completion of one tool from its --help text (cmake -P, at build time), so that
# completion follows the options as they are, never a hand-kept list:
#   cmake -DTOOL=blockmm-gen -DPROGRAM=<path of the tool> -DOUT=<completion file> -P GenerateCompletion.cmake
# (BLOCKMM_MPI=0: a build under an MPI launcher must not start MPI for --help).
# Reads both help layouts (CLI11's, as the C++ tools print it, and argparse's, as the Python tools
# do): an option line starts with "  -", its names and placeholder end at the first two spaces.
#   {a,b,c} (CLI11 "TEXT:{a,b}=a", argparse "{a,b}")  -> those words complete the value
#   [=a|b]                                            -> an optional value: those words, or files
#   SIZE                                              -> a few sizes (64M 256M 1G 4G)
#   TEXT, FILE, a name ending in .png ...             -> files
#   INT, UINT, FLOAT, N, M, ...                       -> nothing (a number)
# Subcommands (blockmm-job) are the words after the tool's name on its usage lines ("Usage:", "or:").
cmake_minimum_required(VERSION 3.22)
foreach(_var TOOL PROGRAM OUT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "GenerateCompletion.cmake needs -D${_var}=...")
  endif()
endforeach()

set(ENV{BLOCKMM_MPI} 0)
execute_process(COMMAND "${PROGRAM}" --help OUTPUT_VARIABLE _help RESULT_VARIABLE _result)
if(NOT _result EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --help failed (${_result})")
endif()
# One list element a line: no ';' inside the lines, and no brackets, which CMake's lists treat as
# grouping (an unbalanced one would join lines): '[' and ']' are read as '<' and '>' below.
string(REPLACE ";" "," _help "${_help}")
string(REPLACE "[" "<" _help "${_help}")
string(REPLACE "]" ">" _help "${_help}")
string(REPLACE "\n" ";" _lines "${_help}")
set(_options "")
set(_cases "")
set(_subcommands "")
set(_numbers "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^ *(Usage:|or:) +${TOOL} +([a-z][a-z-]*)( |$)")
    list(APPEND _subcommands "${CMAKE_MATCH_2}")
    continue()
  endif()
  if(NOT _line MATCHES "^  +(-.*)$")
    continue()
  endif()
  # The names and placeholder: up to the first two spaces (the description follows them).
  string(REGEX REPLACE "  .*$" "" _spec "${CMAKE_MATCH_1}")
  set(_choices "")
  set(_optional FALSE)
  if(_spec MATCHES "\\{([^}]*)\\}")
    string(REPLACE "," " " _choices "${CMAKE_MATCH_1}")
    string(REGEX REPLACE "\\{[^}]*\\}" "CHOICE" _spec "${_spec}")
  elseif(_spec MATCHES "<=([^>]*)>")
    string(REPLACE "|" " " _choices "${CMAKE_MATCH_1}")
    set(_optional TRUE)
    string(REGEX REPLACE " ?<=[^>]*>" "" _spec "${_spec}")
  endif()
  string(REPLACE "," ";" _items "${_spec}")
  set(_names "")
  set(_placeholder "")
  foreach(_item IN LISTS _items)
    string(STRIP "${_item}" _item)
    if(_item MATCHES "^(-[^ ]+)( (.*))?$")
      list(APPEND _names "${CMAKE_MATCH_1}")
      if(NOT "${CMAKE_MATCH_3}" STREQUAL "")  # (a plain if() reads "N" as false)
        set(_placeholder "${CMAKE_MATCH_3}")
      endif()
    endif()
  endforeach()
  if(NOT _names)
    continue()
  endif()
  list(APPEND _options ${_names})
  # CLI11 adds REQUIRED and Excludes: ... after the type: the type is the first word.
  string(REGEX REPLACE " .*$" "" _type "${_placeholder}")
  string(REPLACE ";" "|" _pattern "${_names}")
  if(NOT _choices STREQUAL "")
    if(_optional)
      string(APPEND _cases "    ${_pattern}) words=\"${_choices}\" files=1 ;;\n")
    else()
      string(APPEND _cases "    ${_pattern}) words=\"${_choices}\" ;;\n")
    endif()
  elseif(_type STREQUAL "SIZE" OR _type MATCHES "^SIZE=")
    string(APPEND _cases "    ${_pattern}) words=\"64M 256M 1G 4G\" ;;\n")
  elseif(_type MATCHES "^(INT|UINT|FLOAT|NUMBER|N|M|K|CELLS|ALPHA|D|T)(=.*)?$")
    list(APPEND _numbers ${_names})
  endif()
endforeach()
if(NOT _options)
  message(FATAL_ERROR "no options found in ${PROGRAM} --help")
endif()
list(REMOVE_DUPLICATES _options)
list(JOIN _options " " _options)
list(REMOVE_DUPLICATES _subcommands)
list(JOIN _subcommands " " _subcommands)
if(NOT _numbers STREQUAL "")
  list(JOIN _numbers "|" _numbers)
  string(APPEND _cases "    ${_numbers}) return 0 ;;  # a number\n")
endif()
string(MAKE_C_IDENTIFIER "${TOOL}" _id)
set(_subcommand_case "")
if(NOT _subcommands STREQUAL "")  # the first word names one (blockmm-job check)
  set(_subcommand_case "  elif ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W \"${_subcommands}\" -- \"\$cur\")
    return 0
")
endif()

file(WRITE "${OUT}" "# bash completion for ${TOOL}, made from `${TOOL} --help` at build time
# (cmake/GenerateCompletion.cmake); installed as share/bash-completion/completions/${TOOL}.
_blockmm_complete_${_id}() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev='' option_index=\$((COMP_CWORD - 1))
  # --name=value: bash splits it at '=' (COMP_WORDBREAKS), into --name, = and the value.
  if [[ \$cur == = ]]; then
    cur=''
  elif ((option_index > 0)) && [[ \${COMP_WORDS[option_index]} == = ]]; then
    option_index=\$((option_index - 1))
  fi
  ((option_index >= 0)) && prev=\${COMP_WORDS[option_index]}
  local words='' files=0
  case \$prev in
${_cases}  esac
  COMPREPLY=()
  if [[ -n \$words ]]; then
    mapfile -t COMPREPLY < <(compgen -W \"\$words\" -- \"\$cur\")
    ((files)) || return 0
  elif [[ \$cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W \"${_options}\" -- \"\$cur\")
    return 0
${_subcommand_case}  fi
  local file
  while IFS= read -r file; do COMPREPLY+=(\"\$file\"); done < <(compgen -f -- \"\$cur\")
}
complete -o filenames -F _blockmm_complete_${_id} ${TOOL}
")
