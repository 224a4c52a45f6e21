/* build.h -- what a test program learns about its build at run time: where
 * the build tree put the programs it runs, and which sanitizer's runtime it
 * runs under.
 *
 * Neither is compiled in.  The test command's ASan stage shares the normal
 * stage's compiled test code (through ccache: scripts/test.sh), so a test's
 * object file must be the same in every build tree and every stage: a path
 * is named relative to the build tree's root (its CMakeCache.txt), and found
 * from /proc/self/exe; the sanitizer is the one whose runtime the process
 * has (the test code itself may be built without it: the library, the shim
 * and the CLI are what the stage checks). */
#ifndef RMUTEX_TEST_HARNESS_BUILD_H
#define RMUTEX_TEST_HARNESS_BUILD_H

/* The absolute path of rel, relative to the root of the build tree this
 * test program is in (e.g. "cli/rmutex"); "" names the root itself.  The
 * string lives as long as the process.  Aborts the test program, with a
 * message, when the program is not inside a build tree. */
const char *rmt_built(const char *rel);

/* The process runs under AddressSanitizer's, ThreadSanitizer's, either's
 * runtime. */
bool rmt_asan();
bool rmt_tsan();
inline bool rmt_sanitized() { return rmt_asan() || rmt_tsan(); }

/* The programs the CMake files name (their paths relative to the root
 * come as *_REL definitions: tests/CMakeLists.txt, rmutex_test_built). */
#ifdef RMUTEX_CLI_REL
#define RMUTEX_CLI rmt_built(RMUTEX_CLI_REL)
#endif
#ifdef RMUTEX_LIB_REL
#define RMUTEX_LIB rmt_built(RMUTEX_LIB_REL)
#endif
#ifdef RMUTEX_TEST_CHILD_REL
#define RMUTEX_TEST_CHILD rmt_built(RMUTEX_TEST_CHILD_REL)
#endif
#ifdef RMUTEX_STACK_CHILD_REL
#define RMUTEX_STACK_CHILD rmt_built(RMUTEX_STACK_CHILD_REL)
#endif
#ifdef RMUTEX_FAIR_CHILD_REL
#define RMUTEX_FAIR_CHILD rmt_built(RMUTEX_FAIR_CHILD_REL)
#endif
#ifdef RMUTEX_FAIR_SKEW_REL
#define RMUTEX_FAIR_SKEW rmt_built(RMUTEX_FAIR_SKEW_REL)
#endif
#ifdef SHIM_PRELOAD_REL
#define SHIM_PRELOAD rmt_built(SHIM_PRELOAD_REL)
#endif
#ifdef SHIM_PROG_REL
#define SHIM_PROG rmt_built(SHIM_PROG_REL)
#endif
#ifdef SHIMSEM_PROG_REL
#define SHIMSEM_PROG rmt_built(SHIMSEM_PROG_REL)
#endif
#ifdef SWAP_PROG_REL
#define SWAP_PROG rmt_built(SWAP_PROG_REL)
#endif
#ifdef SWAPSEM_PROG_REL
#define SWAPSEM_PROG rmt_built(SWAPSEM_PROG_REL)
#endif
#ifdef RMUTEX_FAIR_LUA_REL
#define RMUTEX_FAIR_LUA rmt_built(RMUTEX_FAIR_LUA_REL)
#endif

#endif
