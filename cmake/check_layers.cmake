# check_layers.cmake -- the library's calls point one way: down the layers
# of src/ (src/README.md), and never in a circle.
#
#   cmake -DNM=<nm> -DSRC=<src dir> -DLAYERS="base;net;..." \
#         -DOBJECTS="<obj>;<obj>..." -P check_layers.cmake
#
# A module is a .c file of src/<layer>/ (and its header).  What the include
# check (check_includes.cmake) cannot see, this one does, from the object
# files themselves: module A calls B when an object of A has an undefined
# symbol that B's object defines (nm).  It fails (FATAL_ERROR) when
#   - a module calls a module of a higher layer (LAYERS lists them from the
#     bottom up);
#   - the calls between modules form a cycle (within a layer: across
#     layers the first rule already forbids it);
#   - a module's header declares a function of another module: functions
#     are named rm_<module>_..., and each is declared by its own module's
#     header only (internal.h, shared by every file, is exempt).
foreach(_v NM SRC LAYERS OBJECTS)
  if(NOT ${_v})
    message(FATAL_ERROR "check_layers.cmake: ${_v} is not set")
  endif()
endforeach()

set(_problems "")

# ---- modules and their layers ----
set(_mods "")
foreach(_o IN LISTS OBJECTS)
  if(NOT _o MATCHES "/([a-z_]+)/([a-z_]+)\\.c\\.o$")
    continue() # (generated code: the embedded scripts)
  endif()
  set(_layer "${CMAKE_MATCH_1}")
  set(_m "${CMAKE_MATCH_2}")
  list(FIND LAYERS "${_layer}" _rank)
  if(_rank EQUAL -1)
    string(APPEND _problems "\n  ${_m}.c is in src/${_layer}/, which is not a layer (${LAYERS})")
    continue()
  endif()
  list(APPEND _mods "${_m}")
  set(_rank_${_m} ${_rank})
  set(_layer_${_m} "${_layer}")
  set(_obj_${_m} "${_o}")
endforeach()

# ---- who defines what ----
foreach(_m IN LISTS _mods)
  execute_process(COMMAND ${NM} -P "${_obj_${_m}}" OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${_obj_${_m}}")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  set(_undef_${_m} "")
  foreach(_l IN LISTS _lines)
    if(_l MATCHES "^([A-Za-z_][A-Za-z0-9_]*) ([A-Z])")
      set(_sym "${CMAKE_MATCH_1}")
      set(_t "${CMAKE_MATCH_2}")
      if(_t STREQUAL "U")
        if(_sym MATCHES "^(rm_|rmutex|rcond|rrwlock|rsem|rbarrier|ronce)")
          list(APPEND _undef_${_m} "${_sym}")
        endif()
      elseif(_t MATCHES "^[TDBRCGS]$")
        set(_def_${_sym} "${_m}")
      endif()
    endif()
  endforeach()
endforeach()

# ---- calls: no call upward ----
foreach(_m IN LISTS _mods)
  set(_calls_${_m} "")
  foreach(_sym IN LISTS _undef_${_m})
    set(_d "${_def_${_sym}}")
    if(NOT _d OR _d STREQUAL _m)
      continue()
    endif()
    list(APPEND _calls_${_m} "${_d}")
    if(_rank_${_d} GREATER _rank_${_m})
      string(APPEND _problems
             "\n  ${_layer_${_m}}/${_m} calls ${_sym} of ${_layer_${_d}}/${_d}, a higher layer")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _calls_${_m})
endforeach()

# ---- calls: no cycle (remove what calls nothing left, repeatedly) ----
set(_left ${_mods})
set(_progress TRUE)
while(_progress)
  set(_progress FALSE)
  foreach(_m IN LISTS _left)
    set(_free TRUE)
    foreach(_d IN LISTS _calls_${_m})
      list(FIND _left "${_d}" _i)
      if(NOT _i EQUAL -1)
        set(_free FALSE)
        break()
      endif()
    endforeach()
    if(_free)
      list(REMOVE_ITEM _left "${_m}")
      set(_progress TRUE)
    endif()
  endforeach()
endwhile()
foreach(_m IN LISTS _left)
  set(_on "")
  foreach(_d IN LISTS _calls_${_m})
    list(FIND _left "${_d}" _i)
    if(NOT _i EQUAL -1)
      list(APPEND _on "${_d}")
    endif()
  endforeach()
  string(REPLACE ";" " " _on "${_on}")
  string(APPEND _problems "\n  call cycle: ${_m} -> ${_on}")
endforeach()

# ---- headers declare their own module's functions only ----
file(GLOB_RECURSE _headers "${SRC}/*.h")
foreach(_h IN LISTS _headers)
  get_filename_component(_hm "${_h}" NAME_WE)
  if(_hm STREQUAL "internal")
    continue()
  endif()
  file(STRINGS "${_h}" _decls REGEX "^[a-z_].*[ *]rm_[a-z]+_[a-z0-9_]*\\(")
  foreach(_l IN LISTS _decls)
    string(REGEX MATCH "[ *](rm_([a-z]+)_[a-z0-9_]*)\\(" _x "${_l}")
    set(_fn "${CMAKE_MATCH_1}")
    set(_owner "${CMAKE_MATCH_2}")
    if(_fn AND NOT _owner STREQUAL _hm)
      file(RELATIVE_PATH _rel "${SRC}" "${_h}")
      string(APPEND _problems "\n  ${_rel} declares ${_fn}, a function of module ${_owner}")
    endif()
  endforeach()
endforeach()

if(_problems)
  message(FATAL_ERROR "the layers of ${SRC} are not kept:${_problems}")
endif()
list(LENGTH _mods _n)
message(STATUS "calls of ${SRC}: ${_n} modules in layers ${LAYERS}, all pointing down, no cycle")
