/* watchdog.h -- the process's lease-renewal thread. */
#ifndef RM_WATCHDOG_H
#define RM_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "internal.h"

struct rm_endpoint;
struct rm_watchdog_entry;

/* Start renewing the hold of the lock key lock by owner (its field) with
 * a lease of lease_ms, and its owner mark (key mark) when robust.  The
 * hold is known good until valid_until; the first renewal is due at due
 * (lease/3 after the acquiring call -- for a fair hand-off, the
 * confirming one -- was sent).  m is passed to the lost-lock callback
 * (NULL: nobody is told -- unless by_name, a read-write lock's hold: the
 * callback is told with m NULL and the lock's name).  Returns the entry,
 * or NULL when out of memory. */
struct rm_watchdog_entry *rm_watchdog_hold(struct rm_endpoint *ep, const char *lock,
                                           const char *mark, int robust, const char *owner,
                                           size_t owner_len, unsigned long lease_ms,
                                           rm_nsec valid_until, rm_nsec due, rmutex_t *m,
                                           int by_name);

/* Start renewing a process's read holds of a read-write lock (rwlock.lua:
 * the lock hash, the readers zset, the process's holds hash and Redisson's
 * timeout key; uuid the process's), one renewal for all of them, as a
 * hold: lost (the callback, with m NULL and the lock's name) when Redis no
 * longer has the process among the readers. */
struct rm_watchdog_entry *rm_watchdog_reads(struct rm_endpoint *ep, const char *lock,
                                            const char *readers, const char *holds,
                                            const char *timeout, const char *uuid,
                                            size_t uuid_len, unsigned long lease_ms,
                                            rm_nsec valid_until, rm_nsec due);

/* Start renewing a process's permits of a semaphore (sem.lua: its lease in
 * the leases zset; lost and sem, the lost hash and the value hash, tell a
 * loss from permits all posted), one renewal whatever their number: lost
 * (the callback, with m NULL and the semaphore's name) when the server
 * gave them back. */
struct rm_watchdog_entry *rm_watchdog_permits(struct rm_endpoint *ep, const char *name,
                                              const char *leases, const char *lost,
                                              const char *sem, const char *uuid,
                                              size_t uuid_len, unsigned long lease_ms,
                                              rm_nsec valid_until, rm_nsec due);

/* Start keeping a queued waiter (a fair lock's, a condition's, a
 * read-write lock's) alive: its liveness deadline in the zset alive is
 * pushed to server time + lease_ms every lease_ms/3, while it is there;
 * alive, queue and state (keys of one slot) are kept for two leases, and
 * extra too when not NULL.  Never "lost"; cancel it when the waiting call
 * ends. */
struct rm_watchdog_entry *rm_watchdog_waiter(struct rm_endpoint *ep, const char *alive,
                                 const char *queue, const char *state, const char *extra,
                                 const char *waiter, size_t waiter_len, unsigned long lease_ms);

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

/* ---- periodic calls: the holder registry's announcements (registry.c) ---- */

/* The call a periodic entry makes: script with argv (KEYS first); mem is
 * freed once the answer is in (argv and lens may live in it). */
struct rm_watchdog_call {
    int script, nkeys, argc;
    const char **argv;
    size_t *lens;
    void *mem;
    rm_nsec again; /* build returned 0: due again then (0: dormant until poked) */
};

/* What a periodic entry's owner does.  build: with the watchdog's lock
 * held -- it may list the holds (rm_watchdog_each_hold_locked), must not
 * block nor call in here otherwise -- fill *call for ep now (key: the
 * entry's key, KEYS[1]), or return 0 to send nothing and stay dormant
 * until poked (or until call->again, when it sets that).  done: the call
 * was answered (answered = 1) or not, sent at sent; return when it is due
 * again.  A call answered NOSCRIPT reaches neither: the watchdog sends the
 * same call again at once with the script's body (watchdog.c, apply). */
struct rm_watchdog_periodic {
    int (*build)(void *arg, struct rm_endpoint *ep, const char *key, size_t key_len, rm_nsec now,
                 struct rm_watchdog_call *call);
    rm_nsec (*done)(void *arg, int answered, rm_nsec sent, rm_nsec now);
    /* (may be NULL) the entry was made: a new start of the watchdog. */
    void (*start)(void *arg);
};

/* fn(ep, owner) is called after each new hold, with the watchdog's lock
 * held (set once, at start, by runtime.c for the registry). */
void rm_watchdog_on_hold(void (*fn)(struct rm_endpoint *ep, const char *owner,
                                    size_t owner_len));

/* With the watchdog's lock held (that hook): the periodic entry of fns on
 * ep, or NULL; a new one, due at due, routed by key (copied), living until
 * the watchdog stops (NULL out of memory); make e due by due at the
 * latest (while e's call is out, by due or its end, whichever is later:
 * that call may not carry what the poke is for). */
struct rm_watchdog_entry *rm_watchdog_periodic_find_locked(const struct rm_endpoint *ep,
                                                           const struct rm_watchdog_periodic *fns);
struct rm_watchdog_entry *rm_watchdog_periodic_locked(struct rm_endpoint *ep, const char *key,
                                                      size_t key_len,
                                                      const struct rm_watchdog_periodic *fns,
                                                      void *arg, rm_nsec due);
void rm_watchdog_poke_locked(struct rm_watchdog_entry *e, rm_nsec due);

/* Without the watchdog's lock (a waiting thread, registry.c): make the
 * periodic entry of fns on ep (routed by key) due by due at the latest,
 * creating it if it is not there. */
void rm_watchdog_periodic_poke(struct rm_endpoint *ep, const char *key, size_t key_len,
                               const struct rm_watchdog_periodic *fns, rm_nsec due);

/* For build: fn(arg, lock key, length, when it was acquired) for each hold
 * of ep that is not lost, at most max (fn NULL: count only).  Returns how
 * many. */
size_t rm_watchdog_each_hold_locked(const struct rm_endpoint *ep, size_t max,
                                    void (*fn)(void *arg, const char *lock, size_t len,
                                               rm_nsec acquired),
                                    void *arg);

/* Stop the thread (rmutex_shutdown); entries must be gone. */
void rm_watchdog_stop(void);

/* fork(): -1 lock, 0 unlock, 1 child: no thread, no entries, no socket. */
void rm_watchdog_atfork(int who);

#endif
