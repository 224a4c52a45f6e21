# Turns the Lua scripts into a C file: each script's exact bytes, with its
# "--!include" lines expanded (lua_expand.cmake), and the SHA1 Redis computes
# for them (EVALSHA).  The expanded scripts are also written to LUADIR, for
# the tests and the benchmark that call them directly.  Run as:
#   cmake -DOUT=... -DLUADIR=... -DSCRIPTS="a.lua|b.lua" -P embed_scripts.cmake
include(${CMAKE_CURRENT_LIST_DIR}/lua_expand.cmake)
string(REPLACE "|" ";" SCRIPTS "${SCRIPTS}")
file(MAKE_DIRECTORY ${LUADIR})
set(_body "/* Generated from the .lua files in src/lua (includes expanded) by cmake/embed_scripts.cmake. Do not edit. */\n#include \"script.h\"\n\n")
set(_table "const struct rm_script rm_scripts[RM_SCRIPT_COUNT] = {\n")
foreach(_f IN LISTS SCRIPTS)
  get_filename_component(_name ${_f} NAME_WE)
  lua_expand(${_f} _text "")
  set(_x ${LUADIR}/${_name}.lua)
  file(WRITE ${_x}.tmp "${_text}")
  file(COPY_FILE ${_x}.tmp ${_x} ONLY_IF_DIFFERENT)
  file(REMOVE ${_x}.tmp)
  file(READ ${_x} _hex HEX)
  file(SHA1 ${_x} _sha)
  file(SIZE ${_x} _size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
  string(APPEND _body "static const char src_${_name}[] = {${_bytes}0};\n")
  string(TOUPPER ${_name} _up)
  string(APPEND _table "    [RM_SCRIPT_${_up}] = { \"${_name}\", src_${_name}, ${_size}, \"${_sha}\" },\n")
endforeach()
string(APPEND _table "};\n")
file(WRITE ${OUT}.tmp "${_body}\n${_table}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
