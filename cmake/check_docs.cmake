# check_docs.cmake -- the prose names every file of the library.
#
#   cmake -DSRC=<src dir> -DDOCS="<file>;<file>..." -P check_docs.cmake
#
# Every .c file of src/ (in its layer folders), and every header that has no
# .c of its own (a header-only module: handle.h), must be named -- as
# `name.c` / `name.h`, anywhere in the text -- in each of DOCS
# (docs/ARCHITECTURE.md and src/README.md): a file added or renamed
# without a word there fails this.
if(NOT SRC OR NOT DOCS)
  message(FATAL_ERROR "usage: cmake -DSRC=<dir> -DDOCS=<files> -P check_docs.cmake")
endif()
file(GLOB_RECURSE _c RELATIVE "${SRC}" "${SRC}/*.c")
file(GLOB_RECURSE _h RELATIVE "${SRC}" "${SRC}/*.h")
set(_names "")
foreach(_f IN LISTS _c)
  get_filename_component(_n "${_f}" NAME)
  list(APPEND _names "${_n}")
endforeach()
foreach(_f IN LISTS _h)
  get_filename_component(_n "${_f}" NAME_WE)
  get_filename_component(_d "${_f}" DIRECTORY)
  if(NOT EXISTS "${SRC}/${_d}/${_n}.c" AND NOT _n STREQUAL "internal")
    list(APPEND _names "${_n}.h")
  endif()
endforeach()
set(_problems "")
foreach(_doc IN LISTS DOCS)
  file(READ "${_doc}" _text)
  foreach(_n IN LISTS _names)
    string(FIND "${_text}" "${_n}" _at)
    if(_at EQUAL -1)
      string(APPEND _problems "\n  ${_doc} does not name ${_n}")
    endif()
  endforeach()
endforeach()
if(_problems)
  message(FATAL_ERROR "files of ${SRC} the prose does not name:${_problems}")
endif()
list(LENGTH _names _k)
message(STATUS "every one of the ${_k} files of ${SRC} is named in ${DOCS}")
