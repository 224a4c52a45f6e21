# pkgconfig.cmake -- rmutex_install_pc(NAME): install cmake/NAME.pc.in as
# NAME.pc under <libdir>/pkgconfig.
#
# The file is written at install time, by cmake/install_pc.cmake, not at
# configure time: a .pc written now would name the configured prefix, and
# `cmake --install build --prefix DIR` would install one that points
# somewhere else.  What the install script needs from the configuration
# (the directories, the version, the directories the linker searches
# anyway) travels in the install code.
include_guard(GLOBAL)

function(rmutex_install_pc name)
  set(_system ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES})
  install(CODE "
    set(RM_PC_TEMPLATE \"${PROJECT_SOURCE_DIR}/cmake/${name}.pc.in\")
    set(RM_PC_NAME \"${name}\")
    set(RM_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
    set(RM_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
    set(RM_PC_VERSION \"${PROJECT_VERSION}\")
    set(RM_PC_SYSTEM_DIRS \"${_system}\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/install_pc.cmake\")")
endfunction()
