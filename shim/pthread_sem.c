/* pthread_sem.c -- sem_t under <rmutex/pthread.h>.
 *
 * A rmutex_pthread_sem_t is an rsem (rm_sem_: the semaphore of every
 * process, dsem.c) or, when it has no name every process would agree on,
 * glibc's semaphore (rm_local_) alone.
 *
 * Names.  sem_init gives a semaphore in a symbol (a global or static
 * variable, an element of a static array) that symbol's name, as
 * pthread_mutex_init does.  A heap or stack one gets none: the call-site
 * rule that makes such mutexes one lock would make such semaphores one
 * semaphore, and a semaphore shared by objects that each count their own
 * permits is wrong, not merely slower.  It stays process-local and the
 * process says so once; rmutex_pthread_sem_init_named names one.
 *
 * sem_open's names are explicit: "/jobs" is the rsem "jobs" (semopen.c).
 *
 * POSIX's return convention: 0, or -1 with errno. */
#define RMUTEX_PTHREAD_NO_MACROS
#include <rmutex/pthread.h>

#include "dsem.h"
#include "semopen.h"
#include "say.h"
#include "symname.h"
#include "take.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static int fail(int e)
{
    if (!e) return 0;
    errno = e;
    return -1;
}

static int local_sem(const rmutex_pthread_sem_t *s)
{
    return __atomic_load_n(&s->rm_local_only_, __ATOMIC_ACQUIRE) != 0;
}

static int init_named(rmutex_pthread_sem_t *s, const char *name, unsigned value)
{
    s->rm_opened_ = 0;
    int r = rsem_init(&s->rm_sem_, name, value, NULL);
    if (!r) __atomic_store_n(&s->rm_local_only_, 0, __ATOMIC_RELEASE);
    return r;
}

int rmutex_pthread_sem_init_named(rmutex_pthread_sem_t *s, const char *name, unsigned value)
{
    if (!s || !name) return fail(EINVAL);
    return fail(init_named(s, name, value));
}

int rmutex_pthread_sem_init(rmutex_pthread_sem_t *s, int pshared, unsigned value)
{
    if (!s || value > SEM_VALUE_MAX) return fail(EINVAL);
    /* Shared memory cannot hold it: it points into its process's memory
     * (and it is shared through Redis already), as the mutex refuses. */
    if (pshared) return fail(ENOTSUP);
    char *name = rm_symbol_name_of(s);
    if (name) {
        int r = init_named(s, name, value);
        free(name);
        return fail(r);
    }
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        rm_say("the sem_t at %p that sem_init initialized is in no symbol (heap or stack "
               "memory): it and any like it are process-local semaphores; name them with "
               "rmutex_pthread_sem_init_named (docs/porting.md)", (void *)s);
    memset(&s->rm_sem_, 0, sizeof s->rm_sem_);
    s->rm_opened_ = 0;
    if (sem_init(&s->rm_local_, 0, value)) return -1;
    __atomic_store_n(&s->rm_local_only_, 1, __ATOMIC_RELEASE);
    return 0;
}

int rmutex_pthread_sem_destroy(rmutex_pthread_sem_t *s)
{
    if (!s) return fail(EINVAL);
    if (local_sem(s)) return sem_destroy(&s->rm_local_);
    return fail(rsem_destroy(&s->rm_sem_));
}

static int wait_as(rmutex_pthread_sem_t *s, int mode, clockid_t clock, const struct timespec *abs)
{
    if (!s) return fail(EINVAL);
    if (local_sem(s)) {
        switch (mode) {
        case RM_DM_TRY: return sem_trywait(&s->rm_local_);
        case RM_DM_FOREVER: return sem_wait(&s->rm_local_);
        default: return sem_clockwait(&s->rm_local_, clock, abs);
        }
    }
    return fail(rm_ds_wait(&s->rm_sem_, mode, clock, abs));
}

int rmutex_pthread_sem_wait(rmutex_pthread_sem_t *s) { return wait_as(s, RM_DM_FOREVER, CLOCK_REALTIME, NULL); }
int rmutex_pthread_sem_trywait(rmutex_pthread_sem_t *s) { return wait_as(s, RM_DM_TRY, CLOCK_REALTIME, NULL); }

int rmutex_pthread_sem_timedwait(rmutex_pthread_sem_t *s, const struct timespec *abstime)
{
    return wait_as(s, RM_DM_TIMED, CLOCK_REALTIME, abstime);
}

int rmutex_pthread_sem_clockwait(rmutex_pthread_sem_t *s, clockid_t clock, const struct timespec *abstime)
{
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return fail(EINVAL);
    return wait_as(s, RM_DM_TIMED, clock, abstime);
}

int rmutex_pthread_sem_post(rmutex_pthread_sem_t *s)
{
    if (!s) return fail(EINVAL);
    if (local_sem(s)) return sem_post(&s->rm_local_);
    return fail(rm_ds_post(&s->rm_sem_));
}

int rmutex_pthread_sem_getvalue(rmutex_pthread_sem_t *s, int *value)
{
    if (!s || !value) return fail(EINVAL);
    if (local_sem(s)) return sem_getvalue(&s->rm_local_, value);
    return fail(rm_ds_getvalue(&s->rm_sem_, value));
}

/* ---- sem_open: semopen.c, the objects on the heap ---- */

static rmutex_pthread_sem_t *heap_alloc(void) { return calloc(1, sizeof(rmutex_pthread_sem_t)); }
static void heap_release(rmutex_pthread_sem_t *s) { free(s); }
static const struct rm_semopen_mem heap = { heap_alloc, heap_release };

rmutex_pthread_sem_t *rmutex_pthread_sem_open(const char *name, int oflag, ...)
{
    unsigned value = 0;
    if (oflag & O_CREAT) {
        va_list ap;
        va_start(ap, oflag);
        (void)va_arg(ap, int); /* mode_t, promoted: permissions are Redis's ACL's business */
        value = va_arg(ap, unsigned);
        va_end(ap);
    }
    return rm_semopen(name, oflag, value, NULL, &heap);
}

int rmutex_pthread_sem_close(rmutex_pthread_sem_t *s) { return fail(rm_semclose(s, &heap)); }
int rmutex_pthread_sem_unlink(const char *name) { return fail(rm_semunlink(name)); }
