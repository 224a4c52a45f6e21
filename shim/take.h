/* take.h -- taking a name in Redis for a ported program, whatever kind of
 * lock it is (a mutex's rmutex, a read-write lock's rrwlock): the answer
 * of every call sorted into one a pthread call may give, Redis trouble
 * told to the policy (policy.c) and waited through (take.c). */
#ifndef RM_TAKE_H
#define RM_TAKE_H

#include <stdint.h>
#include <time.h>

/* How long an acquisition may wait. */
enum { RM_DM_TRY, RM_DM_FOREVER, RM_DM_TIMED };

/* The three ways to ask librmutex for one lock: try once; wait for ever;
 * wait until an absolute CLOCK_MONOTONIC time.  lock is the caller's;
 * kind what it is (RM_POLICY_MUTEXES or RM_POLICY_RWLOCKS, policy.h). */
struct rm_take_ops {
    int (*try_once)(void *lock);
    int (*forever)(void *lock);
    int (*until)(void *lock, const struct timespec *mono_abs);
    int kind;
};

typedef int64_t rm_take_ns;

/* What an answer of librmutex means for a pthread call: itself when Redis
 * answered (0, EOWNERDEAD, ENOTRECOVERABLE, EDEADLK: taken, or never will
 * be; EBUSY: held elsewhere), ETIMEDOUT, else RM_TAKE_DOWN (no connection:
 * EAGAIN) or RM_TAKE_REFUSED (an error no pthread call returns), both told
 * to the policy. */
enum { RM_TAKE_DOWN = -1, RM_TAKE_REFUSED = -2 };
int rm_take_settle(int r);

/* 1 when r (settled) ends an acquisition: taken or never will be. */
int rm_take_final(int r);

/* Take lock as mode allows: 0, EOWNERDEAD, ENOTRECOVERABLE, EDEADLK, EBUSY
 * (trylock: held elsewhere, or Redis cannot be used), ETIMEDOUT, EINVAL
 * (a bad abstime, when the call would block) -- never an error that would
 * leave the program going on without the lock.  sliced: a blocking wait
 * is cut into slices (a lock whose waiters do not lose their place by
 * giving up: the non-fair mutex), so that an outage starting during it is
 * noticed. */
int rm_take(const struct rm_take_ops *ops, void *lock, int sliced, int mode, clockid_t clock,
            const struct timespec *abstime);

/* CLOCK_MONOTONIC (or clock) now, and a sleep until t on CLOCK_MONOTONIC
 * that is not a cancellation point and survives signals. */
rm_take_ns rm_take_now(clockid_t clock);
void rm_take_pause_until(rm_take_ns t);

/* A call that is not an acquisition (a semaphore's post, a barrier's
 * arrival, a once) got r from librmutex, an outage or a refusal: tell the
 * policy, then pause (*pause: 0 at first, doubled to a second) so that the
 * caller asks again -- a refusal fixed on the server heals the program. */
void rm_take_ask_again(int r, rm_take_ns *pause);

#endif
