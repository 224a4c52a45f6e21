# test_objects.cmake -- link another build tree's compiled C++ test code.
#
# The C++ test code is most of a build's compile time (GoogleTest's
# templates: 3-10 CPU-seconds a file), and the ASan stage of
# scripts/test.sh compiles it exactly as the normal stage does
# (RMUTEX_SANITIZE_TESTS=OFF: the sanitizers instrument the C -- library,
# shim, CLI, helpers -- and the test programs only link their runtime).  So
# that tree need not compile it at all: with RMUTEX_TEST_OBJECTS_FROM set
# to the normal stage's build tree, rmutex_test_import_objects() replaces
# every C++ source of the test targets by the object that tree compiled
# from it (same source, same relative paths: tests/harness/build.h finds
# the programs a test runs relative to its own build tree), and the C
# sources are compiled here, instrumented.
#
# An object is found where CMake puts it: <tree>/<the target's binary dir,
# relative>/CMakeFiles/<target>.dir/<the source, relative to the target's
# source dir; "../" spelt "__/">.o.  A source whose object is not there
# (the other tree is not built, or a target it did not build) is compiled
# here as usual: importing is an optimisation, never a requirement.  The
# imported objects are dependencies of the link: the other tree's rebuild
# relinks this one's programs.
set(RMUTEX_TEST_OBJECTS_FROM "" CACHE PATH
  "A build tree of the same sources, configured without sanitizing C++, whose C++ test objects this tree links instead of compiling them")

# The object of source src (absolute) of target tgt defined in directory dir.
function(_rmt_object_of out tgt dir src)
  get_property(bin DIRECTORY ${dir} PROPERTY BINARY_DIR)
  file(RELATIVE_PATH relbin ${CMAKE_BINARY_DIR} ${bin})
  file(RELATIVE_PATH rel ${dir} ${src})
  string(REPLACE "../" "__/" rel "${rel}")
  set(obj "${RMUTEX_TEST_OBJECTS_FROM}/${relbin}/CMakeFiles/${tgt}.dir/${rel}.o")
  string(REPLACE "//" "/" obj "${obj}")
  if(EXISTS "${obj}")
    set(${out} "${obj}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# The sources of target tgt (of directory dir) with each C++ source that
# has an object in the other tree replaced by it; n counts the imports.
function(_rmt_import_sources out n tgt dir)
  get_target_property(srcs ${tgt} SOURCES)
  set(result "")
  set(count 0)
  foreach(s IN LISTS srcs)
    if(s MATCHES "^\\$<TARGET_OBJECTS:(.+)>$")
      # An object library's objects (the harness): all of them, or none.
      set(lib ${CMAKE_MATCH_1})
      get_target_property(libdir ${lib} SOURCE_DIR)
      get_target_property(libsrcs ${lib} SOURCES)
      set(objs "")
      set(all TRUE)
      foreach(ls IN LISTS libsrcs)
        get_filename_component(abs "${ls}" ABSOLUTE BASE_DIR ${libdir})
        _rmt_object_of(obj ${lib} ${libdir} "${abs}")
        if(obj)
          list(APPEND objs "${obj}")
        else()
          set(all FALSE)
        endif()
      endforeach()
      if(all)
        list(APPEND result ${objs})
        set_property(TARGET ${lib} PROPERTY EXCLUDE_FROM_ALL TRUE) # nothing else needs it
        list(LENGTH objs k)
        math(EXPR count "${count} + ${k}")
      else()
        list(APPEND result "${s}")
      endif()
    elseif(s MATCHES "\\.cc$")
      get_filename_component(abs "${s}" ABSOLUTE BASE_DIR ${dir})
      _rmt_object_of(obj ${tgt} ${dir} "${abs}")
      if(obj)
        list(APPEND result "${obj}")
        math(EXPR count "${count} + 1")
      else()
        list(APPEND result "${abs}")
      endif()
    else()
      if(NOT IS_ABSOLUTE "${s}" AND NOT s MATCHES "^\\$<")
        get_filename_component(s "${s}" ABSOLUTE BASE_DIR ${dir})
      endif()
      list(APPEND result "${s}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
  set(${n} ${count} PARENT_SCOPE)
endfunction()

# Every linked target of directory dir and the directories below it.
function(rmutex_test_import_objects dir)
  if(NOT RMUTEX_TEST_OBJECTS_FROM)
    return()
  endif()
  set(total 0)
  set(pending ${dir})
  while(pending)
    list(POP_FRONT pending d)
    get_property(subdirs DIRECTORY ${d} PROPERTY SUBDIRECTORIES)
    list(APPEND pending ${subdirs})
    get_property(targets DIRECTORY ${d} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY)$")
        continue()
      endif()
      _rmt_import_sources(srcs k ${t} ${d})
      if(k GREATER 0) # (a source named *.o is an external object to CMake)
        set_property(TARGET ${t} PROPERTY SOURCES "${srcs}")
        set_property(TARGET ${t} PROPERTY LINKER_LANGUAGE CXX) # (objects only: not inferred)
        math(EXPR total "${total} + ${k}")
      endif()
    endforeach()
  endwhile()
  message(STATUS "rmutex: ${total} C++ test objects linked from ${RMUTEX_TEST_OBJECTS_FROM}")
endfunction()
