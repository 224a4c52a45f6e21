/* pthread_spin.c -- pthread_spinlock_t under <rmutex/pthread.h>.
 *
 * A spinlock shared by the threads of one process is, in a program ported
 * to many processes, a lock those processes must share too: left to glibc
 * it would stop excluding anyone the moment the program ran twice.  So the
 * swap makes every pthread_spinlock_t a distributed non-fair mutex, the
 * same object as a swapped pthread_mutex_t (rmutex_pthread_spinlock_t is
 * that type), named by the same rules: an explicit name is impossible (no
 * attribute), so the symbol it lives in, else pthread_spin_init's call
 * site; a zero-filled one ("static pthread_spinlock_t s;", glibc's
 * unlocked value) gets its symbol's name at first use, as a zero-filled
 * mutex does.
 *
 * Semantics are glibc's where a program can see them: pthread_spin_lock
 * waits (it blocks instead of spinning: the wait is on Redis), trylock is
 * EBUSY when another thread holds it, a relock by the holder never returns
 * (glibc's spins forever; the local mutex is of type NORMAL); unlike
 * glibc's, only the holder may unlock it (another thread's unlock is
 * EPERM: the hold is the thread's, as every rmutex hold is), and every
 * Redis trouble is handled as for mutexes (policy.c): the lock waits, the
 * line is said, the program never runs unlocked.
 *
 * PTHREAD_PROCESS_SHARED is refused with ENOTSUP, as the mutex and
 * read-write lock attributes refuse it: the lock is shared through Redis
 * already, and the object cannot be -- it points into its process's
 * memory, which another process mapping the same page cannot follow. */
#define RMUTEX_PTHREAD_NO_MACROS
#include <rmutex/pthread.h>

#include <errno.h>

int rmutex_pthread_spin_init(rmutex_pthread_spinlock_t *s, int pshared, const char *site)
{
    if (!s) return EINVAL;
    if (pshared == PTHREAD_PROCESS_SHARED) return ENOTSUP;
    if (pshared != PTHREAD_PROCESS_PRIVATE) return EINVAL;
    return rmutex_pthread_mutex_init(s, NULL, site);
}

int rmutex_pthread_spin_destroy(rmutex_pthread_spinlock_t *s) { return rmutex_pthread_mutex_destroy(s); }
int rmutex_pthread_spin_lock(rmutex_pthread_spinlock_t *s) { return rmutex_pthread_mutex_lock(s); }
int rmutex_pthread_spin_trylock(rmutex_pthread_spinlock_t *s) { return rmutex_pthread_mutex_trylock(s); }
int rmutex_pthread_spin_unlock(rmutex_pthread_spinlock_t *s) { return rmutex_pthread_mutex_unlock(s); }
