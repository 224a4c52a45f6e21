/* runtime.h -- what every module must do at a shutdown, a fork and the
 * process's exit (runtime.c); the lazy start is the session's (session.h). */
#ifndef RM_RUNTIME_H
#define RM_RUNTIME_H

/* rmutex_shutdown(), without the entry point's errno and cancellation
 * handling (api.c). */
int rm_runtime_shutdown(void);

#endif
