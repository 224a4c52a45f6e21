/* watchdog.h -- the process's lease-renewal thread. */
#ifndef RM_WATCHDOG_H
#define RM_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "internal.h"

struct rm_endpoint;
struct rm_keys;
struct rm_watchdog_entry;

/* Start renewing the hold of k by owner with a lease of
 * lease_ms (and its owner mark when robust).  The hold is known good until valid_until; the first renewal
 * is due at due (lease/3 after the acquiring call -- for a fair hand-off,
 * the confirming one -- was sent).  m is passed to the lost-lock callback.
 * Returns the entry, or NULL when out of memory. */
struct rm_watchdog_entry *rm_watchdog_hold(struct rm_endpoint *ep, const struct rm_keys *k,
                               int robust, const char *owner, size_t owner_len,
                               unsigned long lease_ms, rm_nsec valid_until, rm_nsec due,
                               rmutex_t *m);

/* Start keeping a queued waiter (a fair lock's, a condition's) alive: its
 * liveness deadline in the zset alive is pushed to server time + lease_ms
 * every lease_ms/3, while it is there; alive, queue and state (keys of
 * one slot) are kept for two leases.  Never "lost"; cancel it when the
 * waiting call ends. */
struct rm_watchdog_entry *rm_watchdog_waiter(struct rm_endpoint *ep, const char *alive,
                                 const char *queue, const char *state, const char *waiter,
                                 size_t waiter_len, unsigned long lease_ms);

/* A waiter entry whose renewal finds it no longer queued (granted, or
 * taken out as dead while it lives: a stall) calls fn(arg) from now on --
 * on the watchdog's thread, under its lock, after which the multiplexer's
 * may be taken: fn must only wake the waiting thread.  fn NULL: nothing is
 * called (set it so around anything that makes arg invalid). */
void rm_watchdog_set_wake(struct rm_watchdog_entry *e, void (*fn)(void *arg), void *arg);

/* Stop renewing e and free it; after this no renewal of it is sent.
 * (One already on the wire finds the hold gone, or renews the same owner's
 * hold, and its answer is ignored.)  Waits for a lost-lock callback of e
 * that is running.  Returns 1 if the watchdog had found the hold lost. */
int rm_watchdog_cancel(struct rm_watchdog_entry *e);

/* The handle passed to e's lost-lock callback from now on; NULL: no
 * callback (a cached hold nobody is inside). */
void rm_watchdog_set_user(struct rm_watchdog_entry *e, rmutex_t *m);

/* e's hold is a parked cache's (cache.c) or no longer: another process
 * may take a parked hold over, so finding it gone then is no lost lock
 * (not counted in locks_lost). */
void rm_watchdog_set_parked(struct rm_watchdog_entry *e, int parked);

/* 1 if the watchdog has found e's hold lost.  Lock-free. */
int rm_watchdog_lost(const struct rm_watchdog_entry *e);

/* 1 if the connection to e's server dropped since e's last renewal and the
 * watchdog has not renewed it since: the server may have restarted and
 * wiped the hold, so its known-good time proves nothing until then (a
 * cached lock asks Redis instead of trusting it).  Lock-free. */
int rm_watchdog_unverified(const struct rm_watchdog_entry *e);

/* Until when e's hold is known good: the send time of the last acquire or
 * renewal Redis acknowledged, plus the lease (CLOCK_MONOTONIC).  Lock-free
 * (a cached lock asks at every local lock). */
rm_nsec rm_watchdog_valid_until(const struct rm_watchdog_entry *e);

/* A hold of m (lock name) was found gone by its own unlock before the
 * watchdog found out: count it and run the lost-lock callback, on the
 * calling thread, with no lock held. */
void rm_watchdog_report_lost(rmutex_t *m, const char *name);

/* The most arguments (KEYS and ARGV) a deferred call may have. */
#define RM_WATCHDOG_MAXARGS 24

/* Call a script in the background until it answers or give_up_at: the
 * release of a hold that could not be released in the caller's time.
 * argv[0..nkeys) are KEYS, the rest ARGV (at most RM_WATCHDOG_MAXARGS in
 * all); all are copied. */
void rm_watchdog_defer(struct rm_endpoint *ep, int script, int nkeys, int argc,
                 const char *const *argv, const size_t *lens, rm_nsec give_up_at);

/* Stop the thread (rmutex_shutdown); entries must be gone. */
void rm_watchdog_stop(void);

/* fork(): -1 lock, 0 unlock, 1 child: no thread, no entries, no socket. */
void rm_watchdog_atfork(int who);

#endif
