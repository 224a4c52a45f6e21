# lua_expand.cmake -- expand "--!include NAME.lua" lines of a Lua script.
#
#   include(lua_expand.cmake) and call lua_expand(IN OUT_VAR LIBDIR), or run
#   cmake -DIN=<script> -DOUT=<file> [-DLIBDIR=<dir>] -P lua_expand.cmake
#
# Each line that is exactly "--!include NAME.lua" becomes the content of
# LIBDIR/NAME.lua (default: lib/ beside the script).  Redis runs the
# expanded text, so its SHA1 is what EVALSHA names.
function(lua_expand in out_var libdir)
  if(NOT libdir)
    get_filename_component(_dir "${in}" DIRECTORY)
    set(libdir "${_dir}/lib")
  endif()
  file(READ "${in}" _text)
  string(REGEX MATCHALL "(^|\n)--!include [A-Za-z0-9_]+\\.lua" _incs "${_text}")
  foreach(_inc IN LISTS _incs)
    string(REGEX MATCH "--!include ([A-Za-z0-9_]+\\.lua)" _m "${_inc}")
    set(_lib "${libdir}/${CMAKE_MATCH_1}")
    if(NOT EXISTS "${_lib}")
      message(FATAL_ERROR "${in}: no ${_lib} to include")
    endif()
    file(READ "${_lib}" _body)
    string(REPLACE "--!include ${CMAKE_MATCH_1}\n" "${_body}" _text "${_text}")
  endforeach()
  set(${out_var} "${_text}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE AND DEFINED IN)
  lua_expand("${IN}" _expanded "${LIBDIR}")
  file(WRITE "${OUT}" "${_expanded}")
endif()
