/* take.c -- taking a name in Redis for a ported program: every answer of
 * librmutex sorted into one a pthread call may give, Redis trouble waited
 * through.
 *
 * DESIGN
 * ------
 * Ported code does not check what a lock returns, so the distributed part
 * of a pthread lock (a mutex: dmutex.c; a read-write lock: drwlock.c)
 * never returns as if the lock were taken when it is not.  Every wait
 * starts with one try; its answer is sorted (rm_take_settle) into an
 * answer for the pthread call, an outage (EAGAIN: no connection) or a
 * refusal (an error no pthread call returns: a bad URL, a refused login,
 * an ACL...), the last two told to policy.c, which says them in one line
 * (or, RMUTEX_ON_ERROR=abort, ends the program) naming what waits: each
 * acquisition tells it its kind of lock (struct rm_take_ops.kind).  Then lock keeps waiting,
 * trylock says EBUSY, a timed lock times out.  Through an outage
 * librmutex's blocking call itself waits; for a lock whose waiters lose
 * nothing by giving up (the non-fair mutex) a blocking wait is cut into
 * slices of SLICE_MS, each followed by another try, so an outage that
 * starts while a thread waits is noticed too.  A queued lock (the fair
 * mutex, a read-write lock: giving up a wait would lose the place in the
 * queue) is not sliced: its outages are noticed when a wait starts (and,
 * under the shim, by the library's outage callback).  A refusal comes back
 * at once from every call, so the wait pauses itself (PAUSE_MIN_MS
 * doubling to PAUSE_MAX_MS) before asking again: a login or an ACL fixed
 * on the server heals the program without a restart. */
#include "take.h"
#include "policy.h"

#include <errno.h>
#include <pthread.h>

#include <rmutex.h>

#define SLICE_MS 2000
#define PAUSE_MIN_MS 100 /* asking again after an error: 100 ms, doubling... */
#define PAUSE_MAX_MS 1000 /* ... to a second */

typedef rm_take_ns nsec;

nsec rm_take_now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (nsec)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ts_of(nsec t)
{
    struct timespec ts = { (time_t)(t / 1000000000), (long)(t % 1000000000) };
    return ts;
}

/* Convert abstime on clock into a CLOCK_MONOTONIC deadline, glibc's order of
 * checks: a negative tv_sec has passed, then tv_nsec must be in range.
 * Returns 0, EINVAL or ETIMEDOUT. */
static int mono_deadline(clockid_t clock, const struct timespec *abs, nsec *out)
{
    if (!abs) return EINVAL;
    if (abs->tv_sec < 0) return ETIMEDOUT;
    if (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000) return EINVAL;
    if (abs->tv_sec > INT64_MAX / 1000000000 - 2) {
        *out = INT64_MAX;
        return 0;
    }
    nsec at = (nsec)abs->tv_sec * 1000000000 + abs->tv_nsec;
    nsec mono = rm_take_now(CLOCK_MONOTONIC);
    nsec left = at - (clock == CLOCK_MONOTONIC ? mono : rm_take_now(clock));
    if (left <= 0) return ETIMEDOUT;
    *out = left > INT64_MAX - mono ? INT64_MAX : mono + left;
    return 0;
}

int rm_take_settle(int r)
{
    switch (r) {
    case 0:
    case EOWNERDEAD:
    case ENOTRECOVERABLE:
    case EDEADLK:
    case EBUSY:
        rm_policy_answered();
        return r;
    case ETIMEDOUT:
        return r;
    case EAGAIN:
        rm_policy_outage(rmutex_detail());
        return RM_TAKE_DOWN;
    default:
        rm_policy_error(r, rmutex_detail()); /* returns unless RMUTEX_ON_ERROR=abort */
        return RM_TAKE_REFUSED;
    }
}

int rm_take_final(int r) { return r == 0 || r == EOWNERDEAD || r == ENOTRECOVERABLE || r == EDEADLK; }

void rm_take_pause_until(nsec t)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct timespec ts = ts_of(t);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    pthread_setcancelstate(old, NULL);
}

int rm_take(const struct rm_take_ops *ops, void *lock, int sliced, int mode, clockid_t clock,
            const struct timespec *abs)
{
    rm_policy_uses(ops->kind);
    int r = rm_take_settle(ops->try_once(lock)), e;
    if (rm_take_final(r)) return r;
    if (mode == RM_DM_TRY) return EBUSY;
    nsec deadline = INT64_MAX, pause = PAUSE_MIN_MS * 1000000LL;
    if (mode == RM_DM_TIMED && (e = mono_deadline(clock, abs, &deadline))) return e;
    for (;;) {
        nsec now = rm_take_now(CLOCK_MONOTONIC);
        if (r == RM_TAKE_REFUSED) {
            /* librmutex answers at once: wait here, then ask again. */
            rm_take_pause_until(deadline - now > pause ? now + pause : deadline);
            if (pause < PAUSE_MAX_MS * 1000000LL) pause *= 2;
        } else {
            /* Busy, or Redis down (librmutex waits through the outage). */
            nsec until = deadline;
            if (sliced && deadline - now > (nsec)SLICE_MS * 1000000) until = now + (nsec)SLICE_MS * 1000000;
            struct timespec ts = ts_of(until);
            r = rm_take_settle(until == INT64_MAX ? ops->forever(lock) : ops->until(lock, &ts));
            if (rm_take_final(r)) return r;
            if (r == RM_TAKE_REFUSED) continue;
        }
        if (rm_take_now(CLOCK_MONOTONIC) >= deadline) return ETIMEDOUT;
        r = rm_take_settle(ops->try_once(lock));
        if (rm_take_final(r)) return r;
    }
}

void rm_take_ask_again(int r, nsec *pause)
{
    if (r == EAGAIN || r == ETIMEDOUT) rm_policy_outage(rmutex_detail());
    else rm_policy_error(r, rmutex_detail());
    if (*pause < PAUSE_MIN_MS * 1000000LL) *pause = PAUSE_MIN_MS * 1000000LL;
    rm_take_pause_until(rm_take_now(CLOCK_MONOTONIC) + *pause);
    if (*pause < PAUSE_MAX_MS * 1000000LL) *pause *= 2;
}
