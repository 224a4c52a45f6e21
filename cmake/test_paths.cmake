# rmutex_test_paths(TARGET DEF1 TARGET1 [DEF2 TARGET2 ...])
#
# Gives a test program the files it runs without compiling a path of the
# build tree into it: DEFn_REL is TARGETn's file relative to the tree's root,
# and tests/harness/build.h makes DEFn its absolute path at run time.  A test's
# object file is then the same in every build tree, which lets the test
# command's ASan stage link the normal stage's compiled tests
# (cmake/test_objects.cmake).  Before CMake 3.24 (no $<PATH:RELATIVE_PATH>) DEFn is
# the absolute path, as it used to be: everything works, nothing is shared.

# rmutex_test_path_def(VAR DEF TARGET): that definition, in VAR (for a
# source file's COMPILE_DEFINITIONS).
function(rmutex_test_path_def var def tgt)
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.24)
    set(${var} "${def}_REL=\"$<PATH:RELATIVE_PATH,$<TARGET_FILE:${tgt}>,${PROJECT_BINARY_DIR}>\"" PARENT_SCOPE)
  else()
    set(${var} "${def}=\"$<TARGET_FILE:${tgt}>\"" PARENT_SCOPE)
  endif()
endfunction()

function(rmutex_test_paths target)
  set(_args ${ARGN})
  while(_args)
    list(POP_FRONT _args _def _tgt)
    rmutex_test_path_def(_d ${_def} ${_tgt})
    target_compile_definitions(${target} PRIVATE "${_d}")
  endwhile()
endfunction()
