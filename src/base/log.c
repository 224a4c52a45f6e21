/* log.c -- the debug log behind RMUTEX_DEBUG, and the one abort().
 *
 * Nothing here prints unless RMUTEX_DEBUG is set: "1" logs to stderr, any
 * other non-empty value is a file opened for appending.  Lines carry the
 * pid and a monotonic timestamp.  rm_log_panic() is RM_ASSERT's: a broken
 * internal invariant, the only case where the library writes to stderr
 * unasked and aborts. */
#include "internal.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Atomic int rm_log_enabled;
static int log_fd = -1;

void rm_log_init(void)
{
    const char *v = getenv("RMUTEX_DEBUG");
    if (!v || !*v || !strcmp(v, "0")) return;
    if (!strcmp(v, "1")) {
        log_fd = STDERR_FILENO;
    } else {
        log_fd = open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log_fd < 0) return;
    }
    atomic_store_explicit(&rm_log_enabled, 1, memory_order_release);
}

void rm_log_(const char *fmt, ...)
{
    int saved = errno;
    char line[512];
    rm_nsec t = rm_clock_now();
    int n = snprintf(line, sizeof line, "rmutex[%d] %lld.%06lld ", (int)getpid(),
                     (long long)(t / 1000000000), (long long)(t % 1000000000 / 1000));
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, (size_t)n);
    (void)w;
    errno = saved;
}

_Noreturn void rm_log_panic(const char *file, int line, const char *what)
{
    char msg[256];
    int n = snprintf(msg, sizeof msg, "rmutex: internal invariant broken at %s:%d: %s\n", file, line, what);
    ssize_t w = write(STDERR_FILENO, msg, n > 0 ? (size_t)n : 0);
    (void)w;
    abort();
}
