/* runtime.h -- the library's process-wide lifetime: a lazy start on the
 * first call that talks to Redis, the endpoint, configuration and
 * shutdown.  (The fork and exit hooks are runtime.c's own.) */
#ifndef RM_RUNTIME_H
#define RM_RUNTIME_H

struct rm_endpoint;

/* Enter a call that talks to Redis: starts the library on first use (from
 * RMUTEX_URL or the default URL) and returns the endpoint.  Returns 0 or
 * the error of a bad RMUTEX_URL / ENOMEM.  Every successful enter is paired
 * with rm_runtime_leave(); rmutex_shutdown() refuses while any is open. */
int rm_runtime_enter(struct rm_endpoint **ep);
void rm_runtime_leave(void);

/* rmutex_configure(url) and rmutex_shutdown(), without the entry points'
 * errno and cancellation handling (api.c). */
int rm_runtime_configure(const char *url);
int rm_runtime_shutdown(void);

#endif
