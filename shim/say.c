/* say.c -- everything the header swap and the preload shim ever print.
 *
 * Both live inside somebody else's program, so they are silent unless
 * something is wrong that the user must hear about (what, and how often,
 * is decided by their callers: policy.c for Redis trouble, setup.c and
 * listed.c for the shim's configuration, pthread_swap.c for a mutex that
 * stays process-local).  Every message is one line, prefixed with who
 * says it and in which process:
 *
 *   rmutex preload[app 4242]: ...     (the shim)
 *   rmutex pthread[app 4242]: ...     (the header swap)
 *
 * Lines go straight to file descriptor 2 with write(2), in one call each,
 * so they are not interleaved with the program's stdio buffers and do not
 * take stdio's locks.  errno is kept. */
#include "say.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static const char *who = "pthread";

void rm_say_as(const char *w) { who = w; }

void rm_say(const char *fmt, ...)
{
    int saved = errno;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "rmutex %s[%s %d]: ", who, program_invocation_short_name,
                     (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof buf) n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf - 1) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, (size_t)n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    errno = saved;
}
