/* await.h -- what a barrier's and a once's waits share: a script call
 * asked again until Redis answers, and a sleep on a channel. */
#ifndef RM_AWAIT_H
#define RM_AWAIT_H

#include <stddef.h>

#include "clock.h"

struct rm_endpoint;
struct rm_thread;
struct rm_waiter;
struct redisReply;

/* Call script until Redis answers or deadline (RM_FOREVER: while Redis
 * cannot be reached, wait, as rmutex_lock does), with the lock
 * algorithms' retry rule (wait.c): again at once after a lost reply, then
 * with the backoff of a server that cannot be reached.  The first try is
 * made whatever the deadline.  Every call made through here must be safe
 * to repeat.  0 and *out (freeReplyObject), an error reply's errno, or
 * ETIMEDOUT. */
int rm_await_call(struct rm_endpoint *ep, int script, int nkeys, int argc,
                  const char *const *argv, const size_t *lens, rm_nsec deadline,
                  struct rm_thread *self, struct redisReply **out);

/* Sleep on w (joined to its channel when *joined is 1; -1: no channel,
 * a plain sleep) until a message, a (re)subscription or until, with
 * cancel_state (the caller's) in force meanwhile, as rm_sub_wait_cancellable.
 * A refused subscription turns into polling, a moved one is joined again
 * where it is served now (slot: the channel's).  Returns RM_WAKE_*. */
int rm_await_sleep(struct rm_endpoint *ep, int slot, struct rm_waiter *w, int *joined,
                   rm_nsec until, int cancel_state);

/* The time to sleep until, deadline at the latest: for the process's
 * first waiter on w's channel (or one that polls: joined <= 0), the poll
 * cap, or sooner the moment ms from now (a lease the script saw pass then;
 * negative: none); for the k-th after it, k + 1 poll periods -- the first
 * one's look reclaims for every waiter, and its broadcast wakes them all
 * (wait.c's rm_wait_queue_bound). */
rm_nsec rm_await_bound(long long ms, struct rm_waiter *w, int joined, rm_nsec deadline);

#endif
