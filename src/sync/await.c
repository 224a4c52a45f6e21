/* await.c -- a call asked again until Redis answers, and a sleep on a
 * channel: the two halves of every wait of a barrier (barrier.c) and a
 * once (once.c).
 *
 * DESIGN
 * ------
 * Their scripts are idempotent for the caller's id (an arrival, a runner),
 * so a lost reply is simply asked again, on a new connection, with
 * wait.c's rule; the caller's deadline bounds it (RM_FOREVER: it waits
 * for Redis as rmutex_lock does).  Their waiters sleep on a channel where
 * every message is a broadcast ("* ...": the multiplexer wakes every
 * waiter of the channel) and look again at the bound the script gave: the
 * earliest lease it saw, when that passes before the poll cap, so that a
 * death is seen within a lease of it, eagerly, whatever Redis publishes.
 * Only the process's first waiter of a name looks that often: its look
 * reclaims for all, and the broadcast that follows wakes them all; the
 * others look seldom (a last resort), so that a hundred waiters do not make
 * a hundred looks a poll period. */
#include "await.h"
#include "call.h"
#include "endpoint.h"
#include "internal.h"
#include "sub.h"
#include "thread.h"
#include "wait.h"

#include <pthread.h>

int rm_await_call(struct rm_endpoint *ep, int script, int nkeys, int argc,
                  const char *const *argv, const size_t *lens, rm_nsec deadline,
                  struct rm_thread *self, struct redisReply **out)
{
    struct rm_wait w = { deadline == RM_FOREVER ? RM_WAIT_FOREVER : RM_WAIT_TIMED, 0, deadline };
    struct rm_attempts at = { .quiet = 1 };
    for (int first = 1;; first = 0) {
        int r = rm_call(ep, script, nkeys, argc, argv, lens, rm_wait_io_deadline(&w, first), 0,
                        out, NULL);
        if (r >= 0) return r;
        if ((r = rm_wait_failed(&at, &w, r, &self->rng))) return r;
    }
}

int rm_await_sleep(struct rm_endpoint *ep, int slot, struct rm_waiter *w, int *joined,
                   rm_nsec until, int cancel_state)
{
    if (*joined <= 0) {
        int ignored;
        pthread_setcancelstate(cancel_state, &ignored);
        rm_clock_sleep_until(until); /* clock_nanosleep: a cancellation point */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
        return RM_WAKE_TIMEOUT;
    }
    int why = rm_sub_wait_cancellable(w, until, cancel_state);
    if (why == RM_WAKE_REFUSED) { /* no message will come: poll */
        rm_sub_leave(w);
        *joined = -1;
    } else if (why == RM_WAKE_MOVED) {
        RM_COUNT(resubscribes_moved);
        *joined = rm_endpoint_rejoin(ep, slot, w) ? -1 : 1;
    }
    return why;
}

rm_nsec rm_await_bound(long long ms, struct rm_waiter *w, int joined, rm_nsec deadline)
{
    unsigned long rank = joined > 0 ? rm_sub_rank(w) : 0;
    rm_nsec bound = rm_wait_queue_bound(rank, ms, RM_SETTING(waiter_lease_ms));
    return rm_clock_min(deadline, rm_clock_after(bound));
}
