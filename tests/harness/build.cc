/* build.cc -- the build tree and the sanitizer runtime, found at run time.
 * See build.h. */
#include "build.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

static std::string build_root()
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        std::string dir(exe, static_cast<size_t>(n));
        for (size_t slash; (slash = dir.rfind('/')) != std::string::npos && slash > 0;) {
            dir.erase(slash);
            if (access((dir + "/CMakeCache.txt").c_str(), F_OK) == 0) return dir;
        }
    }
    fprintf(stderr, "test harness: this test program is not inside a CMake build tree "
                    "(no CMakeCache.txt above /proc/self/exe): it cannot find the programs it runs\n");
    abort();
}

const char *rmt_built(const char *rel)
{
    static std::mutex mu;
    static std::map<std::string, std::string> paths; /* (nodes never move) */
    static const std::string root = build_root();
    std::lock_guard<std::mutex> hold(mu);
    auto it = paths.find(rel);
    if (it == paths.end()) it = paths.emplace(rel, *rel ? root + "/" + rel : root).first;
    return it->second.c_str();
}

bool rmt_asan()
{
    static const bool yes = dlsym(RTLD_DEFAULT, "__asan_init") != nullptr;
    return yes;
}

bool rmt_tsan()
{
    static const bool yes = dlsym(RTLD_DEFAULT, "__tsan_init") != nullptr;
    return yes;
}
