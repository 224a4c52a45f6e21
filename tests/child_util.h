/* child_util.h -- what the helper processes the tests spawn share (child.cc,
 * fair/fair_child.cc): their argument parsing, their line protocol on
 * stdin/stdout, and making a mutex from "--type=N --robust --lease=MS
 * [--nonfair]".  Header-only: each child is one file plus this. */
#ifndef RMUTEX_TEST_CHILD_UTIL_H
#define RMUTEX_TEST_CHILD_UTIL_H

#include <rmutex.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace rmtc {

/* One line on stdout, whole, even from several threads at once. */
inline void say(const std::string &line)
{
    static std::mutex out_mu;
    std::lock_guard<std::mutex> g(out_mu);
    std::string s = line + "\n";
    const char *p = s.data();
    size_t n = s.size();
    while (n > 0) {
        ssize_t w = write(1, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= static_cast<size_t>(w);
    }
}

/* The value of "key=value" among argv, or dflt. */
inline std::string opt(int argc, char **argv, const char *key, const char *dflt)
{
    size_t k = strlen(key);
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], key, k) == 0 && argv[i][k] == '=') return argv[i] + k + 1;
    return dflt;
}

/* Whether key is among argv. */
inline bool flag(int argc, char **argv, const char *key)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], key) == 0) return true;
    return false;
}

/* The next line of stdin, without its newline; false at its end. */
inline bool read_line(std::string *line)
{
    line->clear();
    char c;
    for (;;) {
        ssize_t n = read(0, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        if (c == '\n') return true;
        line->push_back(c);
    }
}

/* The words of s, split on spaces. */
inline std::vector<std::string> split(const std::string &s)
{
    std::vector<std::string> w;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && s[i] == ' ') i++;
        size_t j = i;
        while (j < s.size() && s[j] != ' ') j++;
        if (j > i) w.push_back(s.substr(i, j - i));
        i = j;
    }
    return w;
}

/* Init m on name from "--type=N", "--robust", "--lease=MS" and, when
 * fair_by_default, "--nonfair" (else always non-fair).  Says "error init
 * rc=... detail=..." and returns false on failure. */
inline bool init_from_args(rmutex_t *m, const char *name, int argc, char **argv,
                           bool fair_by_default)
{
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_settype(&a, atoi(opt(argc, argv, "--type", "0").c_str()));
    rmutexattr_setrobust(&a, flag(argc, argv, "--robust") ? RMUTEX_ROBUST : RMUTEX_STALLED);
    rmutexattr_setlease(&a, strtoul(opt(argc, argv, "--lease", "0").c_str(), nullptr, 10));
    rmutexattr_setcache(&a, flag(argc, argv, "--cache"));
    rmutexattr_setdeadlock_detect(&a, flag(argc, argv, "--detect"));
    rmutexattr_setfair(&a, (fair_by_default || flag(argc, argv, "--fair")) && !flag(argc, argv, "--nonfair"));
    int rc = rmutex_init(m, name, &a);
    rmutexattr_destroy(&a);
    if (rc != 0) {
        say("error init rc=" + std::to_string(rc) + " detail=" + rmutex_detail());
        return false;
    }
    return true;
}

/* The calling thread's fencing token of m, or "none". */
inline std::string fence_of(rmutex_t *m)
{
    uint64_t t = 0;
    if (rmutex_fence(m, &t) != 0) return "none";
    return std::to_string(t);
}

} // namespace rmtc

#endif
