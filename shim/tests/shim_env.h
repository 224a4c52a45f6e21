/* shim_env.h -- the environment of a program run under the preload shim
 * in these tests (shim_test.cc, misconfig_test.cc): LD_PRELOAD of
 * librmutex_preload.so (SHIM_PRELOAD), the RMUTEX_PRELOAD configuration
 * that lists its locks, its RMUTEX_URL, and under a sanitizer's runtime
 * the sanitizer told that the shim is loaded before it.  Given to the harness's Child(argv, env). */
#ifndef RMUTEX_SHIM_TEST_ENV_H
#define RMUTEX_SHIM_TEST_ENV_H

#include <cstdlib>
#include <map>
#include <string>

#include "harness/build.h"

#ifndef SHIM_PRELOAD
#error "SHIM_PRELOAD comes from shim/tests/CMakeLists.txt"
#endif

/* env plus what running under the shim with config and url takes. */
inline std::map<std::string, std::string> shim_env(const std::string &config, const std::string &url,
                                                   std::map<std::string, std::string> env = {})
{
    env["LD_PRELOAD"] = SHIM_PRELOAD;
    env["RMUTEX_PRELOAD"] = config;
    env["RMUTEX_URL"] = url;
    if (rmt_sanitized()) {
        /* The shim comes before the sanitizer runtime in the library list. */
        const char *asan = getenv("ASAN_OPTIONS");
        env["ASAN_OPTIONS"] = std::string("verify_asan_link_order=0") + (asan ? ":" : "") + (asan ? asan : "");
    }
    return env;
}

#endif
