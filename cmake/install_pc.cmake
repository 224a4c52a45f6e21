# install_pc.cmake -- run by `cmake --install` (cmake/pkgconfig.cmake puts
# it there): writes RM_PC_NAME.pc from RM_PC_TEMPLATE for the prefix the
# install really goes to (CMAKE_INSTALL_PREFIX here is --prefix's).
#
# RUNPATH.  When the library directory is not one the linker searches
# anyway (CMake's implicit link directories: /usr/lib/<triplet>, /usr/lib,
# ...), Libs also carries -Wl,-rpath,${libdir}: a program linked with the
# .pc then finds librmutex.so.0 at run time, without LD_LIBRARY_PATH or
# ldconfig.  In a system directory the loader finds it already (after
# ldconfig, for /usr/local/lib and the like: docs/building.md).
#
# In: RM_PC_TEMPLATE, RM_PC_NAME, RM_PC_LIBDIR and RM_PC_INCLUDEDIR
# (relative to the prefix, or absolute), RM_PC_VERSION, RM_PC_SYSTEM_DIRS.
set(RM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(_d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${RM_PC_${_d}}")
    set(RM_PC_${_d}_FULL "${RM_PC_${_d}}")
    set(RM_PC_${_d}_PC "${RM_PC_${_d}}")
  else()
    set(RM_PC_${_d}_FULL "${RM_PC_PREFIX}/${RM_PC_${_d}}")
    set(RM_PC_${_d}_PC "\${prefix}/${RM_PC_${_d}}")
  endif()
  cmake_path(NORMAL_PATH RM_PC_${_d}_FULL)
  string(REGEX REPLACE "(.)/+$" "\\1" RM_PC_${_d}_FULL "${RM_PC_${_d}_FULL}")
endforeach()

set(RM_PC_RPATH "-Wl,-rpath,\${libdir}")
foreach(_s IN LISTS RM_PC_SYSTEM_DIRS)
  cmake_path(NORMAL_PATH _s)
  string(REGEX REPLACE "(.)/+$" "\\1" _s "${_s}")
  if(_s STREQUAL RM_PC_LIBDIR_FULL)
    set(RM_PC_RPATH "")
  endif()
endforeach()

set(_dest "$ENV{DESTDIR}${RM_PC_LIBDIR_FULL}/pkgconfig/${RM_PC_NAME}.pc")
message(STATUS "Installing: ${_dest}")
configure_file("${RM_PC_TEMPLATE}" "${_dest}" @ONLY)
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_dest}")
