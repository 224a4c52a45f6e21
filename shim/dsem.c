/* dsem.c -- a distributed POSIX semaphore, for the header swap
 * (pthread_sem.c) and the preload shim (semlisted.c).
 *
 * DESIGN
 * ------
 * An rsem (rmutex.h) is the whole semaphore: it counts the permits of
 * every process and leases the ones a process took, so unlike a mutex a
 * distributed sem_t needs no local part.  What a ported program needs
 * around it is what drwlock.c gives a read-write lock: Redis trouble never
 * reaches the program as an error it does not expect.  A wait goes
 * through take.c (sem_wait waits through an outage or a refusal, each said
 * in one line; sem_trywait says EAGAIN, the timed forms ETIMEDOUT).  A post
 * is never dropped, since a dropped post is a permit lost for every
 * process: one that Redis does not answer in time is already the library's
 * business (rsem_post hands it to the watchdog, which posts it when Redis
 * answers, and returns 0), so the loop here only asks again after a
 * refusal or an unreachable server (paused between asks, as take.c does).
 *
 * A post from a signal handler.  POSIX makes sem_post async-signal-safe
 * and programs use it so: a SIGINT handler posts to wake the main thread
 * out of sem_wait.  A post over the network is not (it allocates, takes
 * the pool's lock).  The common case is told apart: while a thread is in
 * librmutex on behalf of a ported lock or semaphore it is "inside"
 * (dmutex.c), and a post made then -- by a handler that interrupted that
 * call -- is handed to the library's own thread with rsem_post_signal
 * (atomics and one write(2)).  A handler that interrupts the program
 * elsewhere posts over the network from the handler, which is safe unless
 * the signal interrupted malloc or stdio: such a program should call
 * rsem_post_signal itself (docs/porting.md). */
#include "dsem.h"
#include "dmutex.h"
#include "policy.h"
#include "say.h"
#include "take.h"

#include <errno.h>

/* rsem_trywait's EBUSY (no permit free) is take.c's "held elsewhere";
 * its EAGAIN, Redis not reached, is take.c's outage. */
static int try_once(void *s) { return rsem_trywait(s); }
static int forever(void *s) { return rsem_wait(s); }
static int until(void *s, const struct timespec *t) { return rsem_clockwait(s, CLOCK_MONOTONIC, t); }

static const struct rm_take_ops waiting = { try_once, forever, until, RM_POLICY_SEMAPHORES };

int rm_ds_wait(rsem_t *s, int mode, clockid_t clock, const struct timespec *abstime)
{
    int was = rm_dm_inside_set(1);
    int r = rm_take(&waiting, s, 0, mode, clock, abstime);
    rm_dm_inside_set(was);
    return r == EBUSY ? EAGAIN : r; /* sem_trywait's word for it */
}

int rm_ds_post(rsem_t *s)
{
    if (rm_dm_inside()) return rsem_post_signal(s);
    rm_policy_uses(RM_POLICY_SEMAPHORES);
    rm_take_ns pause = 0;
    int was = rm_dm_inside_set(1), r;
    for (;;) {
        r = rsem_post(s);
        if (r == 0 || r == EOVERFLOW || r == EINVAL) break;
        if (r == EPERM) {
            rm_say("sem_post of %s: this process's permits were lost (%s); the server has given "
                   "them back already, so this post adds nothing", s->rm_name_ ? s->rm_name_ : "a semaphore",
                   rmutex_detail());
            break;
        }
        rm_take_ask_again(r, &pause);
    }
    if (r == 0) rm_policy_answered();
    rm_dm_inside_set(was);
    return r;
}

int rm_ds_getvalue(rsem_t *s, int *value)
{
    rm_policy_uses(RM_POLICY_SEMAPHORES);
    rm_take_ns pause = 0;
    int was = rm_dm_inside_set(1), r;
    while ((r = rsem_getvalue(s, value)) && r != EINVAL) rm_take_ask_again(r, &pause);
    if (r == 0) rm_policy_answered();
    rm_dm_inside_set(was);
    return r;
}
