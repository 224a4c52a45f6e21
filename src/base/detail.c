/* detail.c -- the thread-local failure detail (rmutex_detail): one line
 * saying why the calling thread's last call failed or warned.  It is also
 * written to the debug log (log.c). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

/* Room for Redis's longest texts (MISCONF, DENIED: up to about 1 KiB):
 * what Redis says is passed on whole. */
static __thread char detail_buf[1536];

void rm_detail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail_buf, sizeof detail_buf, fmt, ap);
    va_end(ap);
    rm_log("detail: %s", detail_buf);
}

RMUTEX_API const char *rmutex_detail(void) { return detail_buf; }
