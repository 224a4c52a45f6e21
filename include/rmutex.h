/* rmutex.h -- pthread-style mutexes shared by processes and machines through Redis.
 *
 * An rmutex_t is used like a pthread_mutex_t: rmutex_init() gives it a name,
 * and every thread of every process that opens the same name on the same
 * Redis server excludes every other.  The calls, their order of checks and
 * their return codes follow glibc 2.36's pthread_mutex_* except where a lock
 * shared with other processes must differ; those deviations are marked
 * "Deviation" below and listed in docs/api.md.
 *
 * Conventions that hold for every function in this header:
 *
 *   - The result is 0 or a positive errno value.  Never -1, never EINTR.
 *   - errno is left as it was found.
 *   - None of them is a cancellation point but the condition waits
 *     (rcond_*wait, as pthread_cond_wait): blocking waits run with
 *     cancellation disabled and restart after signals.
 *   - None of them is async-signal-safe.
 *   - A thread-local detail string (rmutex_detail()) says why the last
 *     failing call of the calling thread failed.  It never holds a password.
 *
 * Guarantees, in one paragraph: with one Redis primary, a hold is exclusive
 * as long as its lease has not run out, and the lease is kept alive by a
 * watchdog thread for as long as the holder's process runs.  Failover to a
 * replica, eviction of keys (any maxmemory-policy other than noeviction) and
 * restarts without persistence can break exclusion; use rmutex_fence() where
 * correctness depends on it.
 */
#ifndef RMUTEX_H
#define RMUTEX_H

#include <errno.h>     /* the error codes every call returns */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* clockid_t */
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RMUTEX_API __attribute__((visibility("default")))
#else
#define RMUTEX_API
#endif

/* ------------------------------------------------------------------------
 * Versions.  Versions with the same major number are ABI compatible.
 * ---------------------------------------------------------------------- */
#define RMUTEX_VERSION_MAJOR 0
#define RMUTEX_VERSION_MINOR 1
#define RMUTEX_VERSION_PATCH 0
#define RMUTEX_VERSION_BITS(x, y, z) (((x) << 16) | ((y) << 8) | (z))
#define RMUTEX_VERSION_NUM \
    RMUTEX_VERSION_BITS(RMUTEX_VERSION_MAJOR, RMUTEX_VERSION_MINOR, RMUTEX_VERSION_PATCH)
#define RMUTEX_AT_LEAST_VERSION(x, y, z) (RMUTEX_VERSION_NUM >= RMUTEX_VERSION_BITS(x, y, z))

/* The version of the library loaded at run time, as RMUTEX_VERSION_NUM
 * and as "MAJOR.MINOR.PATCH".  Thread-safe. */
RMUTEX_API unsigned rmutex_version(void);
RMUTEX_API const char *rmutex_version_string(void);

/* ------------------------------------------------------------------------
 * Types.
 * ---------------------------------------------------------------------- */

/* A mutex.  Caller-owned storage of a fixed size; the fields are private.
 * The state behind it is allocated by rmutex_init() or, for a mutex set up
 * with RMUTEX_INITIALIZER, on first use. */
typedef struct rmutex {
    const char *rm_name_; /* the static initializer's name */
    int rm_kind_;           /* the static initializer's type and flags */
    unsigned rm_spare_;
    void *rm_state_;
    void *rm_reserved_[5];
} rmutex_t;

/* Attributes for rmutex_init().  Caller-owned, fields private. */
typedef struct rmutexattr {
    unsigned rm_magic_;
    int rm_kind_;
    unsigned long rm_lease_ms_;
    unsigned long rm_reserved_[6];
} rmutexattr_t;

/* Mutex types: glibc's values. */
enum {
    RMUTEX_NORMAL = 0,     /* relock by the owner deadlocks */
    RMUTEX_RECURSIVE = 1,  /* relock by the owner counts (locally) */
    RMUTEX_ERRORCHECK = 2, /* relock by the owner fails with EDEADLK */
    RMUTEX_DEFAULT = RMUTEX_NORMAL
};

/* Robustness: glibc's values. */
enum { RMUTEX_STALLED = 0, RMUTEX_ROBUST = 1 };

/* Flags for RMUTEX_INITIALIZER_NP. */
enum { RMUTEX_FLAG_ROBUST = 0x100, RMUTEX_FLAG_FAIR = 0x200, RMUTEX_FLAG_CACHE = 0x400,
       RMUTEX_FLAG_DEADLOCK_DETECT = 0x800 };

/* Static initializers.  The name must stay valid until the first call that
 * uses the mutex (a string literal is the usual case); it is copied then.
 *
 *   static rmutex_t orders = RMUTEX_INITIALIZER("shop:orders");
 *   static rmutex_t jobs = RMUTEX_INITIALIZER_NP("jobs", RMUTEX_RECURSIVE, RMUTEX_FLAG_ROBUST);
 */
#define RMUTEX_INITIALIZER(name) { (name), 0, 0, 0, { 0, 0, 0, 0, 0 } }
#define RMUTEX_INITIALIZER_NP(name, type, flags) \
    { (name), (int)(type) | (int)(flags), 0, 0, { 0, 0, 0, 0, 0 } }

/* The longest accepted lock name, in bytes. */
#define RMUTEX_NAME_MAX 1024

/* The most stack, in bytes, that any rmutex call uses in the calling
 * thread, including the process's first call (which connects, loads the
 * scripts and starts the library's own threads; those have stacks of their
 * own).  Every call works on a thread created with a PTHREAD_STACK_MIN
 * (16 KiB) stack; a program that gives its threads less than that plus its
 * own use should allow for this much.  tests/stack_test measures it. */
#define RMUTEX_STACK_NEED 8192

/* The deepest recursion of a RECURSIVE mutex; one more lock gives EAGAIN. */
#define RMUTEX_RECURSION_MAX 2147483647u

/* Returned by the acquiring calls when rmutex_set_wait_replicas() asked for
 * N replicas and fewer acknowledged the acquisition in time.  The hold has
 * been given back.  It is EREMOTEIO on Linux. */
#define RMUTEX_ENOREPLICAS 121

/* ------------------------------------------------------------------------
 * Attributes.  All are thread-safe on distinct attribute objects and need
 * no Redis.  After fork(): usable as before.
 * ---------------------------------------------------------------------- */

/* Initialize attr to the defaults: NORMAL, STALLED, not fair, lease 0 (the
 * lease is kept alive by the watchdog).  Returns 0, or EINVAL if attr is
 * NULL. */
RMUTEX_API int rmutexattr_init(rmutexattr_t *attr);

/* Invalidate attr.  Returns 0, or EINVAL if attr is NULL or not initialized. */
RMUTEX_API int rmutexattr_destroy(rmutexattr_t *attr);

/* Set or get the type: RMUTEX_NORMAL, RMUTEX_RECURSIVE or RMUTEX_ERRORCHECK.
 * Returns 0, or EINVAL for a NULL or uninitialized attr, a NULL out pointer
 * or an unknown type. */
RMUTEX_API int rmutexattr_settype(rmutexattr_t *attr, int type);
RMUTEX_API int rmutexattr_gettype(const rmutexattr_t *attr, int *type);

/* Set or get robustness: RMUTEX_STALLED or RMUTEX_ROBUST.  A robust mutex
 * whose previous holder's lease ran out without an unlock is acquired with
 * EOWNERDEAD -- when that holder locked through a robust handle too (or was
 * handed a fair mutex): only those leave the owner mark behind, so give
 * every handle of a name the same robustness.  Returns 0 or EINVAL, as for
 * the type. */
RMUTEX_API int rmutexattr_setrobust(rmutexattr_t *attr, int robust);
RMUTEX_API int rmutexattr_getrobust(const rmutexattr_t *attr, int *robust);

/* Set or get fairness (0 or 1).  A fair mutex serves threads in the order
 * they first asked, across processes: each waiting thread holds a place in
 * a queue in Redis, kept alive by its process's watchdog (URL option
 * waiter_lease, 3 s: a waiter whose process died is skipped within that
 * lease), and a release hands the lock straight to the next live waiter.
 * trylock never jumps the queue: EBUSY while others are queued.  A fair
 * and a non-fair mutex on the same name exclude each other (they share the
 * lock); only fair handles are queued, and a non-fair release reaches fair
 * waiters by their bounded poll.  The fair queue is rmutex's own layout,
 * not Redisson's RFairLock's.  Returns 0 or EINVAL, as for the type. */
RMUTEX_API int rmutexattr_setfair(rmutexattr_t *attr, int fair);
RMUTEX_API int rmutexattr_getfair(const rmutexattr_t *attr, int *fair);

/* Set or get the lease in milliseconds.  0 (the default) means the hold's
 * lease is rmutex_set_default_lease()'s and the watchdog renews it for as
 * long as the process holds the mutex.  Any other value is a fixed lease:
 * nobody renews it, and a hold that outlives it is lost (unlock then returns
 * EPERM).  Returns 0, or EINVAL for a NULL or uninitialized attr, a NULL out
 * pointer, or a lease above 2^31 - 1 ms. */
RMUTEX_API int rmutexattr_setlease(rmutexattr_t *attr, unsigned long lease_ms);
RMUTEX_API int rmutexattr_getlease(const rmutexattr_t *attr, unsigned long *lease_ms);

/* Set or get lock caching (0 or 1).  A cached mutex keeps its hold in
 * Redis when its last local holder unlocks and no other process has asked
 * for it: the next lock by any thread of this process is then local, with
 * no round trip, and the watchdog keeps renewing the hold meanwhile.  A
 * process that finds the lock held by a caching process asks for it (the
 * acquire that finds it busy publishes the request on the lock's channel);
 * the holder gives it back at its next unlock -- once it has held it for
 * the minimum hold time (URL option cache_min_hold, 5 ms), so that two
 * busy processes take turns in batches instead of one round trip each --
 * or at once if no thread of it is inside.  A cache nobody uses is given
 * back after the idle time (URL option cache_idle, 100 ms): that bounds
 * the wait of a client that does not ask (a Redisson RLock), which then
 * learns of the release by its channel as usual.  Exclusion, fencing (each
 * new owner, also a new thread of the caching process, gets a greater
 * token), robustness, the lost-lock callback and fork (the child caches
 * nothing) keep their meaning; but a process that dies caching a robust
 * mutex, even with no thread inside, leaves EOWNERDEAD to the next robust
 * taker -- unless it had parked it: a cache unused for cache_park (1 ms)
 * is marked parked in Redis, and another process takes a parked lock over
 * in its own acquire, without asking; the next local lock takes it back
 * first (one round trip).  A fair mutex stays FIFO across processes: the process queues
 * as one waiter, another process's queued waiter (or trylock) is a
 * request, and an asked fair cache goes to the first waiter at the next
 * unlock (no minimum hold) and serves no later local lock.  Needs a
 * renewed lease (EINVAL at rmutex_init with a fixed one).  See docs/caching.md.
 * Returns 0 or EINVAL, as for the type. */
RMUTEX_API int rmutexattr_setcache(rmutexattr_t *attr, int cache);
RMUTEX_API int rmutexattr_getcache(const rmutexattr_t *attr, int *cache);

/* Distributed deadlock detection for an ERRORCHECK mutex (opt-in; also
 * the flag RMUTEX_FLAG_DEADLOCK_DETECT of RMUTEX_INITIALIZER_NP): a
 * rmutex_lock (or timed lock) of it returns EDEADLK when its wait closes a
 * cycle of waits across processes -- this thread waits for a lock held by
 * a thread that waits for ... a lock this thread holds -- every wait of
 * which has lasted twice the announce_wait setting and one announcement
 * period (the default lease / 3), instead of waiting forever; of the
 * cycle's detecting threads the youngest wait gives up (rmutex_detail
 * names the cycle).  It sees what the holder registry shows: waits longer
 * than announce_wait, of processes that announce (not RMUTEX_ANNOUNCE=0,
 * not announce_wait=0), on this library's mutexes and write locks; not
 * Redisson's clients, read holds, a thread queued behind its own
 * process's thread at a non-fair mutex, semaphores, barriers.  Ignored for
 * the other types.  The URL option deadlock_detect=1 turns it on for every
 * ERRORCHECK mutex (the header swap's too).  See docs/observability.md.
 * Returns 0 or EINVAL, as for the type. */
RMUTEX_API int rmutexattr_setdeadlock_detect(rmutexattr_t *attr, int detect);
RMUTEX_API int rmutexattr_getdeadlock_detect(const rmutexattr_t *attr, int *detect);

/* ------------------------------------------------------------------------
 * Mutexes.
 *
 * Thread-safety of all of them: any thread may call them on any mutex, as
 * with pthread mutexes; initializing or destroying a mutex while another
 * thread uses it is undefined, as with pthread mutexes.
 *
 * After fork(): the child starts clean.  It has a new owner identity, holds
 * none of the mutexes the parent held (its unlock returns EPERM and never
 * releases the parent's hold), and uses the same rmutex_t objects without
 * re-initializing them.
 * ---------------------------------------------------------------------- */

/* Initialize m with a lock name and attributes (NULL: the defaults).  No
 * Redis round trip happens here.  The name is any byte string of 1 to
 * RMUTEX_NAME_MAX bytes; it is the Redis key of the lock, and the other keys
 * are derived from it as Redisson derives them ("redisson_lock__channel:{NAME}").
 * A name with braces must hold a valid Redis hash tag that keeps all those
 * keys in one cluster slot: "{user:1}:cart" is accepted, "a{b", "{}x" and
 * "a}b" are not.
 *
 * A name is one lock.  Two rmutex_t initialized with the same name (in one
 * process or in many) exclude each other, and in one process they share one
 * hold: a thread that holds the name through one handle and locks it through
 * another gets what the type of the handle it locks through says for a
 * relock -- NORMAL deadlocks (trylock EBUSY, a timed lock ETIMEDOUT),
 * ERRORCHECK returns EDEADLK, RECURSIVE counts one more level, released by
 * an unlock through either handle.  The hold is released in Redis when its
 * last level is.  rmutex_holdcount(), rmutex_fence() and rmutex_unlock()
 * work through any handle of the name; the lock kind, robustness and lease
 * are those of the handle the hold was taken through.
 *
 * Returns 0, EINVAL (m NULL, name NULL, empty, too long or with bad braces,
 * attr not initialized), or ENOMEM. */
RMUTEX_API int rmutex_init(rmutex_t *m, const char *name, const rmutexattr_t *attr);

/* Destroy m.  Its storage may then be reused or initialized again.
 * Returns 0, EBUSY if a thread of this process holds the name through m or
 * waits in a call on m (nothing changes), or EINVAL if m is NULL or not
 * initialized.  A hold taken through another handle of the same name does
 * not make m busy. */
RMUTEX_API int rmutex_destroy(rmutex_t *m);

/* Acquire m, waiting as long as it takes.
 *
 * Returns 0; EOWNERDEAD (robust only: acquired, the previous holder's lease
 * ran out without an unlock; call rmutex_consistent() before unlocking);
 * ENOTRECOVERABLE (robust only: an earlier EOWNERDEAD holder unlocked
 * without rmutex_consistent(); see rmutex_force_unlock()); EDEADLK
 * (ERRORCHECK and the caller holds it); EAGAIN (RECURSIVE and the count is
 * at RMUTEX_RECURSION_MAX); RMUTEX_ENOREPLICAS; EINVAL (m NULL, destroyed or
 * unusable, or the lock key holds a value that is not a lock); ENOMEM
 * (including Redis answering OOM); EROFS (the server is a read-only
 * replica); EACCES (Redis refused our credentials or the commands); EIO
 * (Redis answered an error we do not know; the detail has its text).
 *
 * A NORMAL mutex locked again by its owner deadlocks, as in glibc.
 * While Redis cannot be reached, rmutex_lock keeps trying with jittered
 * backoff and does not return. */
RMUTEX_API int rmutex_lock(rmutex_t *m);

/* Acquire m if it is free now, else return EBUSY without waiting.
 *
 * Returns what rmutex_lock() returns, except that EDEADLK becomes EBUSY
 * (ERRORCHECK trylock by the owner, as in glibc), and: EBUSY (held by another
 * thread or process; for a fair mutex, also when others are queued); EAGAIN
 * (Redis could not be reached or answered "busy loading"; see rmutex_detail()).
 * A RECURSIVE owner's trylock counts and returns 0. */
RMUTEX_API int rmutex_trylock(rmutex_t *m);

/* Acquire m, waiting until the absolute CLOCK_REALTIME time abstime.
 *
 * Returns what rmutex_lock() returns, and ETIMEDOUT at the deadline (also
 * while Redis cannot be reached).  As in glibc, abstime is only looked at when
 * the call would block: then EINVAL if abstime is NULL or its tv_nsec is
 * outside [0, 1e9), ETIMEDOUT if it has passed.
 *
 * Deviation: the deadline is converted once, at entry, into a CLOCK_MONOTONIC
 * deadline; a step of the wall clock during the wait does not move it.  The
 * call never returns ETIMEDOUT before the deadline.  Time spent waiting for a
 * connection counts against it. */
RMUTEX_API int rmutex_timedlock(rmutex_t *m, const struct timespec *abstime);

/* As rmutex_timedlock(), with abstime measured on clock, which must be
 * CLOCK_REALTIME or CLOCK_MONOTONIC (any other clock: EINVAL, checked first,
 * even when m is free, as in glibc). */
RMUTEX_API int rmutex_clocklock(rmutex_t *m, clockid_t clock, const struct timespec *abstime);

/* Release m (one level of a RECURSIVE mutex).
 *
 * Returns 0; EPERM if the calling thread does not hold m, or held it but its
 * lease was lost (expired, deleted, server restarted); ENOTRECOVERABLE if a
 * RECURSIVE hold taken with EOWNERDEAD is released without
 * rmutex_consistent() while inner levels were still held (all levels are
 * dropped); EINVAL if m is NULL or not initialized.
 *
 * Deviation: EPERM for every type, NORMAL included, and an EPERM unlock never
 * releases the lock in Redis.  A thread whose hold was lost gets EPERM, and
 * neither that unlock nor the thread's exit touches the hold of a thread
 * that took the name after it: a hold belongs to one thread and ends once.  A robust mutex acquired with EOWNERDEAD and
 * released without rmutex_consistent() becomes ENOTRECOVERABLE for every
 * robust handle on the same name.  When Redis cannot be reached the release
 * is retried in the background until the lease would have run out, and the
 * call returns 0 (the hold is no longer renewed).  When Redis answers the
 * release with an error, that code (ENOMEM, EROFS, EACCES, EIO) is returned;
 * the hold is not renewed any more and its lease runs out by itself. */
RMUTEX_API int rmutex_unlock(rmutex_t *m);

/* Mark the state protected by m consistent after an EOWNERDEAD acquisition.
 * No Redis round trip.  Returns 0; EINVAL if m is not robust or its hold is
 * not in the inconsistent state; EPERM if the caller does not hold m
 * (glibc does not check the owner; musl does). */
RMUTEX_API int rmutex_consistent(rmutex_t *m);

/* Store in *token the fencing token of the caller's current hold of m.
 * A hold's token is strictly greater than every token given for the same
 * name before it (while Redis keeps its data); relocking a RECURSIVE
 * mutex keeps it.  The first call for a hold takes the token from Redis
 * (one round trip, and only while the hold is still there); later calls
 * for the same hold return it at once.  (A fair hand-off brings its token
 * with it.)  Returns 0; EPERM if the caller does not hold m or its lease
 * was lost; EINVAL for NULL arguments; ETIMEDOUT when Redis did not answer
 * in the command timeout. */
RMUTEX_API int rmutex_fence(rmutex_t *m, uint64_t *token);

/* Store in *deadline the CLOCK_MONOTONIC time until which the caller's
 * current hold of m is known to be its own in Redis: the moment the last
 * acquisition or lease renewal that Redis acknowledged was sent, plus the
 * lease.  Redis cannot expire the hold before it (clock rates aside: leave
 * a margin); while renewals succeed it moves forward every lease/3, while
 * Redis cannot be reached it stays where it is.  A program that must stop
 * touching the protected resource before anyone else can acquire stops by
 * then (the rmutex command kills its child before it).  Returns 0; EPERM if
 * the caller does not hold m or its lease was found lost; EINVAL for NULL
 * arguments. */
RMUTEX_API int rmutex_hold_deadline(rmutex_t *m, struct timespec *deadline);

/* Store in buf the calling thread's owner id, "<process-uuid>:<thread>":
 * the field its holds have in the lock hash (what status tools show, and
 * the rmutex command's RMUTEX_OWNER).  Returns 0; EINVAL for NULL; ERANGE
 * when size cannot take it and its NUL (64 bytes always can). */
RMUTEX_API int rmutex_owner_id(char *buf, size_t size);

/* Store in *count how many times the calling thread holds m (0 if it does
 * not).  Returns 0, or EINVAL for NULL arguments or an uninitialized m. */
RMUTEX_API int rmutex_holdcount(rmutex_t *m, unsigned *count);

/* ------------------------------------------------------------------------
 * Condition variables.
 *
 * An rcond_t is a named condition variable shared by every process that
 * uses the name: pthread_cond_* semantics across processes and machines.
 * A waiter is registered in Redis before its mutex is released, so a
 * signal or broadcast by anyone who takes the mutex after that cannot miss
 * it.  rcond_signal wakes at least one thread that was waiting when it was
 * called (never one that began waiting after it returned); rcond_broadcast
 * wakes all of them, in one call whose cost does not grow with their
 * number.  A wake-up is state in Redis, and pub/sub only hurries it: every
 * wait asks Redis again at least every poll period (URL option poll, at
 * most half the waiter lease), so a lost message costs time, never a
 * wake-up.  Spurious wake-ups happen (a lost connection, a waiter paused
 * longer than its lease): loop on your predicate, as with pthreads.
 *
 * Waiters are leased like fair-lock waiters (URL option waiter_lease, 3 s,
 * renewed by the watchdog): a signal given to a waiter that dies, or that
 * is cancelled before it took the signal, passes to another waiter.  A
 * timed wait that was signalled as it timed out returns 0 and uses the
 * signal.  Nothing of a condition is left in Redis two waiter leases after
 * its last waiter is gone.
 *
 * A wait returns with the mutex held again (also on ETIMEDOUT and when
 * cancelled): a RECURSIVE mutex gets its whole count back, a fair mutex is
 * re-entered through its queue, a robust mutex can report EOWNERDEAD or
 * ENOTRECOVERABLE.
 *
 * While a thread is blocked on a condition, in any process, the condition
 * is bound to its mutex: a wait with another mutex is EINVAL.  Blocked
 * means waiting for a signal or broadcast that has not come: the binding
 * ends as soon as the last such waiter is signalled or broadcast to, even
 * though it has not yet taken its mutex back and returned.  A waiter whose
 * deadline passed, or that was cancelled, was not unblocked by anyone: it
 * keeps the binding until it has left the condition (at once, unless Redis
 * cannot be reached), and a signal can still pick it until then (a timed
 * wait then returns 0); a waiter whose process died keeps the binding
 * until its waiter lease runs out.
 *
 * rcond_wait, rcond_timedwait and rcond_clockwait are cancellation points
 * (the cleanup handlers run with the mutex held); the other calls are not.
 *
 * Return values:
 *   EINVAL   NULL or uninitialized arguments, a bad name or clock or
 *            abstime (tv_nsec outside [0, 1e9), NULL), or a mutex other
 *            than the one of the condition's blocked waiters (above), in
 *            any process; the mutex was not let go of
 *   EPERM    the calling thread does not hold the mutex (wait)
 *   EBUSY    a thread of this process waits on it (destroy)
 *   ETIMEDOUT  the deadline passed (timed waits: the mutex is held again)
 *   EAGAIN   Redis did not answer a signal or broadcast within the
 *            command timeout (it may or may not have been delivered)
 *   EOWNERDEAD, ENOTRECOVERABLE  as rmutex_lock, on retaking the mutex
 * ---------------------------------------------------------------------- */

/* A condition variable.  Caller-owned storage of a fixed size (64 bytes);
 * the fields are private. */
typedef struct rcond {
    const char *rm_name_; /* the static initializer's name */
    int rm_clock_;          /* the static initializer's clock: 0 is REALTIME */
    unsigned rm_spare_;
    void *rm_state_;
    void *rm_reserved_[5];
} rcond_t;

typedef struct rcondattr {
    unsigned rm_magic_;
    int rm_clock_;
    unsigned long rm_reserved_[7];
} rcondattr_t;

/* A condition created on first use, with the default attributes:
 *   static rcond_t nonempty = RCOND_INITIALIZER("{shop}nonempty"); */
#define RCOND_INITIALIZER(name) { (name), 0, 0, 0, { 0, 0, 0, 0, 0 } }

/* Attributes: the clock of rcond_timedwait, CLOCK_REALTIME (the default)
 * or CLOCK_MONOTONIC; anything else is EINVAL. */
RMUTEX_API int rcondattr_init(rcondattr_t *attr);
RMUTEX_API int rcondattr_destroy(rcondattr_t *attr);
RMUTEX_API int rcondattr_setclock(rcondattr_t *attr, clockid_t clock);
RMUTEX_API int rcondattr_getclock(const rcondattr_t *attr, clockid_t *clock);

/* Initialize c as the condition called name (the rules of mutex names;
 * a condition and a mutex may share a name).  attr may be NULL.  No I/O. */
RMUTEX_API int rcond_init(rcond_t *c, const char *name, const rcondattr_t *attr);

/* Forget c in this process.  EBUSY while a thread of this process waits on
 * it; waiters in other processes are not affected (the name lives on). */
RMUTEX_API int rcond_destroy(rcond_t *c);

/* Release m (held by the calling thread, at every level), wait until
 * signalled, broadcast or woken spuriously, and take m again. */
RMUTEX_API int rcond_wait(rcond_t *c, rmutex_t *m);

/* The same, until abstime on the condition's clock (its attributes), or on
 * clock (CLOCK_REALTIME or CLOCK_MONOTONIC).  The deadline is turned into a
 * CLOCK_MONOTONIC one at entry: steps of the wall clock do not move it.  A
 * deadline already past is ETIMEDOUT at once, without letting go of m. */
RMUTEX_API int rcond_timedwait(rcond_t *c, rmutex_t *m, const struct timespec *abstime);
RMUTEX_API int rcond_clockwait(rcond_t *c, rmutex_t *m, clockid_t clock,
                               const struct timespec *abstime);

/* Wake one waiter / every waiter.  Need not hold any mutex.  Waking
 * nobody leaves nothing behind: a later waiter is not woken by it. */
RMUTEX_API int rcond_signal(rcond_t *c);
RMUTEX_API int rcond_broadcast(rcond_t *c);

/* ------------------------------------------------------------------------
 * Read-write locks: pthread_rwlock_* across processes.  Readers share the
 * lock, a writer holds it alone; every thread of every process that uses
 * the same name on the same Redis takes part, and a Redisson
 * RReadWriteLock on the name too (docs/rwlock.md says what a mixed
 * deployment gets).  Return codes as pthread's; besides:
 *   EDEADLK  rdlock or wrlock by the writer; wrlock by a thread that holds
 *            the name for reading, through any handle (no upgrade: at once,
 *            never a hang)
 *   EBUSY    trylock forms: held in a way that excludes the caller (also
 *            by the caller itself, as glibc)
 *   EAGAIN   the thread's read count would overflow; trylock forms when
 *            Redis cannot be reached
 *   EPERM    unlock by a thread that holds nothing of it, or whose hold was
 *            lost (its lease ran out, or the server lost it)
 *   EOWNERDEAD  a robust lock's last writer died holding it: the caller
 *            holds it now (for reading or writing, as asked), the data it
 *            guards may be inconsistent
 *   EINVAL, EACCES, ETIMEDOUT, ENOMEM  as for mutexes
 * Order (the default kind): FIFO by arrival among waiting readers and
 * writers -- a waiting writer holds back readers that come after it, the
 * readers ahead of it share the lock together -- except that a thread's
 * re-read while it reads never waits (it is counted in the thread).  A
 * writer that gives up (timeout, trylock, death) lets the readers behind
 * it go at once.  RRWLOCK_PREFER_READER: a reader goes whenever no writer
 * holds the lock, waiting writers or not (glibc's default; writers can
 * starve).  A dead reader or writer is reclaimed within one lease,
 * whatever the other readers do.
 * ---------------------------------------------------------------------- */

/* A read-write lock.  Caller-owned storage of a fixed size (64 bytes); the
 * fields are private. */
typedef struct rrwlock {
    const char *rm_name_; /* the static initializer's name */
    int rm_kind_;         /* the static initializer's kind and flags */
    unsigned rm_spare_;
    void *rm_state_;
    void *rm_reserved_[5];
} rrwlock_t;

typedef struct rrwlockattr {
    unsigned rm_magic_;
    int rm_kind_;
    unsigned long rm_lease_ms_;
    int rm_robust_;
    int rm_spare_;
    unsigned long rm_reserved_[5];
} rrwlockattr_t;

/* Kinds: glibc's values (pthread_rwlockattr_setkind_np).  The default is
 * RRWLOCK_PREFER_WRITER_NONRECURSIVE's order without its restriction: a
 * thread's re-read never deadlocks.  RRWLOCK_PREFER_WRITER behaves as the
 * default (glibc ignores it too). */
enum {
    RRWLOCK_PREFER_READER = 0,
    RRWLOCK_PREFER_WRITER = 1,
    RRWLOCK_PREFER_WRITER_NONRECURSIVE = 2,
    RRWLOCK_DEFAULT = RRWLOCK_PREFER_WRITER_NONRECURSIVE
};

/* Flags for RRWLOCK_INITIALIZER_NP. */
enum { RRWLOCK_FLAG_ROBUST = 0x100 };

/* Static initializers (the name as for RMUTEX_INITIALIZER):
 *   static rrwlock_t table = RRWLOCK_INITIALIZER("shop:table");
 *   static rrwlock_t cfg = RRWLOCK_INITIALIZER_NP("cfg", RRWLOCK_PREFER_READER, 0); */
#define RRWLOCK_INITIALIZER(name) { (name), RRWLOCK_DEFAULT, 0, 0, { 0, 0, 0, 0, 0 } }
#define RRWLOCK_INITIALIZER_NP(name, kind, flags) \
    { (name), (int)(kind) | (int)(flags), 0, 0, { 0, 0, 0, 0, 0 } }

/* Attributes: the kind; a fixed lease in ms (0, the default: renewed by
 * the watchdog); robust (RMUTEX_ROBUST: a dead writer is reported as
 * EOWNERDEAD to the next taker). */
RMUTEX_API int rrwlockattr_init(rrwlockattr_t *attr);
RMUTEX_API int rrwlockattr_destroy(rrwlockattr_t *attr);
RMUTEX_API int rrwlockattr_setkind_np(rrwlockattr_t *attr, int kind);
RMUTEX_API int rrwlockattr_getkind_np(const rrwlockattr_t *attr, int *kind);
RMUTEX_API int rrwlockattr_setlease(rrwlockattr_t *attr, unsigned long lease_ms);
RMUTEX_API int rrwlockattr_getlease(const rrwlockattr_t *attr, unsigned long *lease_ms);
RMUTEX_API int rrwlockattr_setrobust(rrwlockattr_t *attr, int robust);
RMUTEX_API int rrwlockattr_getrobust(const rrwlockattr_t *attr, int *robust);

/* Initialize l as the read-write lock called name (the rules of mutex
 * names; a read-write lock must not share its name with a mutex: the
 * Redis hash would be the same, as for Redisson's RLock and
 * RReadWriteLock).  attr may be NULL.  No I/O. */
RMUTEX_API int rrwlock_init(rrwlock_t *l, const char *name, const rrwlockattr_t *attr);

/* Forget l in this process: EBUSY while a thread of this process holds it
 * through this handle or waits on it. */
RMUTEX_API int rrwlock_destroy(rrwlock_t *l);

/* Take l for reading / for writing: as pthread_rwlock_rdlock and friends.
 * The timed forms take an absolute CLOCK_REALTIME time, the clock forms
 * CLOCK_REALTIME or CLOCK_MONOTONIC; none times out when the lock can be
 * taken at once.  RMUTEX_ENOREPLICAS as for rmutex_lock: fewer replicas
 * than the settings ask for acknowledged the hold (it was given back). */
RMUTEX_API int rrwlock_rdlock(rrwlock_t *l);
RMUTEX_API int rrwlock_tryrdlock(rrwlock_t *l);
RMUTEX_API int rrwlock_timedrdlock(rrwlock_t *l, const struct timespec *abstime);
RMUTEX_API int rrwlock_clockrdlock(rrwlock_t *l, clockid_t clock, const struct timespec *abstime);
RMUTEX_API int rrwlock_wrlock(rrwlock_t *l);
RMUTEX_API int rrwlock_trywrlock(rrwlock_t *l);
RMUTEX_API int rrwlock_timedwrlock(rrwlock_t *l, const struct timespec *abstime);
RMUTEX_API int rrwlock_clockwrlock(rrwlock_t *l, clockid_t clock, const struct timespec *abstime);

/* Give back the calling thread's hold: one level of its reads, or its
 * write.  EPERM when it holds nothing of l (glibc does not check; POSIX
 * allows it) or its hold was lost. */
RMUTEX_API int rrwlock_unlock(rrwlock_t *l);

/* The writer's fencing token (as rmutex_fence): EPERM unless the calling
 * thread holds l for writing. */
RMUTEX_API int rrwlock_fence(rrwlock_t *l, uint64_t *token);

/* As rmutex_hold_deadline, for the calling thread's hold of l: the
 * writer's lease, or for a reader its process's read lease (one for all
 * the process's reading threads, renewed once a period).  Returns 0;
 * EPERM if the caller holds nothing of l or its lease was found lost;
 * EINVAL for NULL arguments. */
RMUTEX_API int rrwlock_hold_deadline(rrwlock_t *l, struct timespec *deadline);
/* ------------------------------------------------------------------------
 * Counting semaphores (rsem_t): POSIX's semaphore, across processes, with
 * permits that come back when the process holding them dies.  Thread-safe.
 *
 * The value lives in Redis under the name (keys rmutex_sem:{NAME}...).  The
 * first process that uses a name gives it its initial value; a process
 * that initializes an existing name joins it, its value as it is (as
 * sem_open without O_EXCL).  rsem_unlink removes it.
 *
 * Permits are leased to the process that took them: the watchdog renews
 * one lease per name and process, whatever the number of its permits, and
 * a process that dies (kill -9) gives its permits back within one lease;
 * its waiters are woken then.  A post by a process that holds permits of
 * the name gives one of them back; a post by a process that holds none
 * adds a permit (any thread may post, as POSIX says).  So a semaphore that
 * counts a resource (at most N jobs at once) is exact whoever dies; one
 * used to signal between processes (one posts, another waits and never
 * posts) should not reclaim: rsemattr_setreclaim(attr, 0), then taken
 * permits are consumed, as POSIX's.
 *
 * Return codes: 0 or a positive errno:
 *   EBUSY      trywait forms: no permit free (as rmutex_trylock's EBUSY;
 *              the POSIX wrappers say EAGAIN, as sem_trywait does); destroy
 *              while a thread of the process waits on the handle
 *   EAGAIN     trywait forms: Redis could not be reached
 *   ETIMEDOUT  timed forms: the time passed
 *   EOVERFLOW  a post past RSEM_VALUE_MAX
 *   EPERM      a post that gives back a permit this process's lease lost
 *              (the server has given it back already: nothing is added)
 *   EINVAL, EACCES, ENOMEM, RMUTEX_ENOREPLICAS  as for mutexes
 * ---------------------------------------------------------------------- */

#define RSEM_VALUE_MAX 2147483647u

/* A semaphore: caller-owned storage of a fixed size (64 bytes). */
typedef struct rsem {
    const char *rm_name_;  /* the static initializer's name */
    unsigned rm_value_;    /* the static initializer's initial value */
    int rm_flags_;
    void *rm_state_;
    void *rm_reserved_[5];
} rsem_t;

typedef struct rsemattr {
    unsigned rm_magic_;
    int rm_fair_;
    unsigned long rm_lease_ms_;
    int rm_reclaim_;
    int rm_spare_;
    unsigned long rm_reserved_[5];
} rsemattr_t;

/* static rsem_t jobs = RSEM_INITIALIZER("jobs", 4); */
#define RSEM_INITIALIZER(name, value) { (name), (value), 0, 0, { 0, 0, 0, 0, 0 } }

/* Attributes: fair (1: waiters are served in arrival order, and a waiter
 * for n permits is not passed by later waiters for fewer; 0, the default:
 * whoever asks when permits are free); a fixed lease of taken permits in ms
 * (0, the default: renewed by the watchdog); reclaim (1, the default: a
 * dead process's permits come back; 0: taken permits are consumed). */
RMUTEX_API int rsemattr_init(rsemattr_t *attr);
RMUTEX_API int rsemattr_destroy(rsemattr_t *attr);
RMUTEX_API int rsemattr_setfair(rsemattr_t *attr, int fair);
RMUTEX_API int rsemattr_getfair(const rsemattr_t *attr, int *fair);
RMUTEX_API int rsemattr_setlease(rsemattr_t *attr, unsigned long lease_ms);
RMUTEX_API int rsemattr_getlease(const rsemattr_t *attr, unsigned long *lease_ms);
RMUTEX_API int rsemattr_setreclaim(rsemattr_t *attr, int reclaim);
RMUTEX_API int rsemattr_getreclaim(const rsemattr_t *attr, int *reclaim);

/* Initialize s as the semaphore called name (the rules of mutex names),
 * with value permits if the name is new (value <= RSEM_VALUE_MAX, else
 * EINVAL).  attr may be NULL.  No I/O. */
RMUTEX_API int rsem_init(rsem_t *s, const char *name, unsigned value, const rsemattr_t *attr);

/* As rsem_init, then asks Redis at once, as sem_open does (one round
 * trip): flags RSEM_CREATE make the semaphore with value permits if the
 * name is new, RSEM_CREATE | RSEM_EXCL is EEXIST if it exists; without
 * RSEM_CREATE, ENOENT if it does not.  Also EINVAL, EACCES, EAGAIN
 * (Redis not reached), ENOMEM. */
enum { RSEM_CREATE = 1, RSEM_EXCL = 2 };
RMUTEX_API int rsem_open(rsem_t *s, const char *name, unsigned value, const rsemattr_t *attr,
                         int flags);

/* Forget s in this process (EBUSY while a thread waits on it).  The
 * permits the process holds stay held, and leased, until posted. */
RMUTEX_API int rsem_destroy(rsem_t *s);

/* Take one permit: as sem_wait, sem_trywait, sem_timedwait (an absolute
 * CLOCK_REALTIME time) and sem_clockwait (CLOCK_REALTIME or
 * CLOCK_MONOTONIC).  None times out when a permit is free at once. */
RMUTEX_API int rsem_wait(rsem_t *s);
RMUTEX_API int rsem_trywait(rsem_t *s);
RMUTEX_API int rsem_timedwait(rsem_t *s, const struct timespec *abstime);
RMUTEX_API int rsem_clockwait(rsem_t *s, clockid_t clock, const struct timespec *abstime);

/* Take n permits at once (1 <= n <= RSEM_VALUE_MAX), all or none, before
 * abstime on clock (abstime NULL: no limit; a past abstime: a try). */
RMUTEX_API int rsem_wait_n(rsem_t *s, unsigned n, clockid_t clock, const struct timespec *abstime);

/* Give one permit back (or add one), and wake a waiter: as sem_post. */
RMUTEX_API int rsem_post(rsem_t *s);
RMUTEX_API int rsem_post_n(rsem_t *s, unsigned n);

/* rsem_post from a signal handler: async-signal-safe (atomics and one
 * write(2)); the library's own thread makes the post soon after, and
 * before the process exits (exit() or a return from main).  0, or EINVAL
 * (s was never used by a call of this library: its state is made by the
 * first one). */
RMUTEX_API int rsem_post_signal(rsem_t *s);

/* The permits free now (after giving back those of dead processes). */
RMUTEX_API int rsem_getvalue(rsem_t *s, int *value);

/* As rmutex_hold_deadline, for the permits this process holds of s: until
 * when its permit lease (one for all its permits of the name) is known
 * good.  0; EPERM if the process holds none or its lease was found lost;
 * EINVAL for NULL arguments. */
RMUTEX_API int rsem_hold_deadline(rsem_t *s, struct timespec *deadline);

/* Remove the semaphore called name from Redis (as sem_unlink): the next
 * process that uses the name starts it anew.  ENOENT if there is none. */
RMUTEX_API int rsem_unlink(const char *name);

/* ------------------------------------------------------------------------
 * Barriers (rbarrier_t): pthread_barrier_t across processes, cyclic.
 *
 * count members (threads, in any processes) meet at rbarrier_wait; the
 * last to arrive ends the generation: every member returns, exactly one
 * of them RBARRIER_SERIAL_THREAD and the others 0, and the next
 * generation starts.  A process that has initialized the barrier is one
 * of its participants (its lease renewed by the watchdog) until it
 * destroys it; when a participant process dies while a generation is open
 * (or a waiting member's lease runs out), the generation is broken: every
 * member waiting in it returns EOWNERDEAD within one lease, and the
 * barrier starts a fresh generation.  A timed wait that gives up breaks
 * its generation the same way (ETIMEDOUT for itself).
 * ---------------------------------------------------------------------- */

#define RBARRIER_SERIAL_THREAD (-1) /* PTHREAD_BARRIER_SERIAL_THREAD */

typedef struct rbarrier {
    const char *rm_name_;
    unsigned rm_count_;
    int rm_flags_;
    void *rm_state_;
    void *rm_reserved_[5];
} rbarrier_t;

typedef struct rbarrierattr {
    unsigned rm_magic_;
    int rm_spare_;
    unsigned long rm_lease_ms_;
    unsigned long rm_reserved_[6];
} rbarrierattr_t;

/* Attributes: the lease of a participant in ms (0, the default: the
 * watchdog's). */
RMUTEX_API int rbarrierattr_init(rbarrierattr_t *attr);
RMUTEX_API int rbarrierattr_destroy(rbarrierattr_t *attr);
RMUTEX_API int rbarrierattr_setlease(rbarrierattr_t *attr, unsigned long lease_ms);
RMUTEX_API int rbarrierattr_getlease(const rbarrierattr_t *attr, unsigned long *lease_ms);

/* Initialize b as the barrier called name for count members (count 0:
 * EINVAL).  Every process must give the same count: a different one is
 * EINVAL here when live participants have another, else at its first
 * wait.  Joins the participants (one round trip: EAGAIN when Redis does
 * not answer it in time). */
RMUTEX_API int rbarrier_init(rbarrier_t *b, const char *name, unsigned count,
                             const rbarrierattr_t *attr);

/* Leave the participants and forget b: EBUSY while a thread waits on it. */
RMUTEX_API int rbarrier_destroy(rbarrier_t *b);

/* Wait for the generation to fill: 0 or RBARRIER_SERIAL_THREAD when it
 * did; EOWNERDEAD when it was broken; ETIMEDOUT (timed form, an absolute
 * time on clock: CLOCK_REALTIME or CLOCK_MONOTONIC). */
RMUTEX_API int rbarrier_wait(rbarrier_t *b);
RMUTEX_API int rbarrier_clockwait(rbarrier_t *b, clockid_t clock, const struct timespec *abstime);

/* ------------------------------------------------------------------------
 * Once (ronce_t): pthread_once across processes.  The routine runs once
 * per name, in one thread of one process; callers in every process return
 * after it has finished.  Its runner holds a lease while it runs (renewed
 * by the watchdog): if the runner's process dies, or the thread is
 * cancelled, another caller runs the routine.  Done stays done in Redis
 * (key rmutex_once:{NAME}) until ronce_reset.
 * ---------------------------------------------------------------------- */

typedef struct ronce {
    const char *rm_name_;
    int rm_done_;          /* this process has seen it done */
    int rm_spare_;
    void *rm_reserved_[6];
} ronce_t;

/* static ronce_t schema = RONCE_INIT("schema"); */
#define RONCE_INIT(name) { (name), 0, 0, { 0, 0, 0, 0, 0, 0 } }

/* Run routine unless it has run under once's name (or is running: then
 * wait until it has).  Returns 0 once it has run, here or anywhere;
 * EINVAL (NULL, a bad name), EDEADLK (called from inside its own routine:
 * glibc's pthread_once deadlocks), EACCES (refused), ENOMEM.  While Redis is
 * unreachable the call waits, as rmutex_lock does.  A process that has
 * seen it done answers from once itself, with no round trip. */
RMUTEX_API int ronce(ronce_t *once, void (*routine)(void));

/* Forget that the routine of name has run (it runs again at the next
 * ronce of a process that has not seen it done).  ENOENT if it has not. */
RMUTEX_API int ronce_reset(const char *name);

/* ------------------------------------------------------------------------
 * Process-wide settings.  Thread-safe.  After fork(): the child keeps the
 * parent's settings and opens its own connections.
 * ---------------------------------------------------------------------- */

/* Set the Redis server, before the first call that needs it:
 *
 *   redis://[[user]:password@]host[:port][/db][?option=value&...]
 *   rediss://...  the same over TLS (options cacert, capath, cert, key, sni,
 *                 insecure; tls=1 on a cluster's or Sentinel's URL: docs/tls.md)
 *   unix://[[user]:password@]/path/to/redis.sock[?db=N&option=value&...]
 *   redis-cluster://[[user]:password@]host:port[,host:port...][?...]
 *   redis-sentinel://[[user]:password@]host:port[,host:port...]/MASTER[?...]
 *
 * host is a name, an IPv4 address or a bracketed IPv6 address; it is
 * resolved here (or at the first call, for RMUTEX_URL), once.  Options:
 * pool=N (connections, default 8), lease=ms (default watchdog lease,
 * 30000), waiter_lease=ms (liveness of queued fair waiters, 3000),
 * connect_timeout=ms (1000),
 * command_timeout=ms (2000), poll=ms (longest wait between two checks of a
 * busy lock, 2000), idle=ms (how long an unused subscription is kept,
 * 10000), cache_min_hold=ms (how long a cached mutex is kept before
 * another process's request is honoured, 5) and cache_idle=ms (an unused
 * cache is given back after this, 100), cache_park=ms (an unused cache is
 * parked after this, 1; 0: never) (rmutexattr_setcache), replicas=N|auto, wait_timeout=ms and min_replicas=N (see
 * rmutex_set_wait_replicas and rmutex_set_min_replicas); for a cluster
 * or Sentinel also refresh=ms (topology refresh period: 5000, Sentinel
 * 1000) and, for Sentinel, sentinel_user and sentinel_password (the
 * URL's own login is the data nodes').  A cluster's hosts are seeds, any
 * of which may be down; Sentinel's are sentinels (docs/cluster.md).
 * NULL means the environment variable RMUTEX_URL or, without it,
 * redis://127.0.0.1:6379.
 *
 * Returns 0; EINVAL (malformed URL, unknown option, host that does not
 * resolve, a TLS option without TLS or naming a file that cannot be read);
 * EAGAIN (the resolver failed temporarily); EBUSY (the library is already
 * in use: call rmutex_shutdown() first); ENOMEM; RMUTEX_ENOREPLICAS (the
 * URL asks for replica acknowledgement -- replicas=N, min_replicas=N --
 * and its server refuses WAIT: the one case where this call talks to the
 * server, and a server it cannot reach is not refused).  A failed TLS check of a
 * server (certificate, name, refused client certificate, a plain-text
 * server on a TLS URL or the reverse) is EACCES from the calls, with the
 * reason in rmutex_detail(). */
RMUTEX_API int rmutex_configure(const char *url);

/* Set the number of command connections kept per server (1..1024).
 * Returns 0 or EINVAL. */
RMUTEX_API int rmutex_set_pool_size(unsigned n);

/* Set the lease of holds whose mutex has lease 0, in milliseconds
 * (100..2^31 - 1).  The watchdog renews them every lease/3.  Applies to
 * holds acquired afterwards.  Returns 0 or EINVAL. */
RMUTEX_API int rmutex_set_default_lease(unsigned long lease_ms);

/* After each acquisition and renewal, of every lock kind, wait until n
 * replicas acknowledged it, for at most timeout_ms (Redis WAIT).  An
 * acquisition that is not acknowledged in time is given back and the call
 * returns RMUTEX_ENOREPLICAS; a renewal that is not is counted in
 * rmutex_stats_t.replica_shortfalls.  n = 0 (the default) turns it off.
 * n = RMUTEX_WAIT_AUTO waits for every replica the topology knows of the
 * primary (Cluster: CLUSTER SLOTS; Sentinel: the replicas it sees up; a
 * plain server: none is known) and needs one of them, or the floor below.
 * Returns 0 or EINVAL. */
#define RMUTEX_WAIT_AUTO 0xffffffffu
RMUTEX_API int rmutex_set_wait_replicas(unsigned n, unsigned long timeout_ms);

/* The floor (URL option min_replicas, default 0): an acquisition that
 * fewer than n replicas acknowledged is given back (RMUTEX_ENOREPLICAS),
 * whatever the server says about its replicas -- so a primary restarted
 * stale, without its replicas, grants nothing.  Returns 0 or EINVAL. */
RMUTEX_API int rmutex_set_min_replicas(unsigned n);

/* Called when a hold of this process is found gone (expired, deleted,
 * force-unlocked, server restarted or flushed), once per lost hold: by the
 * watchdog thread within lease/3 + 1 s of that happening -- within about a
 * second of the server answering again after a restart, whatever the
 * lease -- or, when the holder's own rmutex_unlock(m) finds out first, by
 * that thread before the unlock returns EPERM.  m is the mutex, name its
 * lock name; the holder's next rmutex_unlock(m) returns EPERM.  The
 * callback must not block for long and must not call rmutex_unlock() on m
 * itself. */
typedef void (*rmutex_lost_fn)(rmutex_t *m, const char *name, void *arg);

/* Install fn (NULL: none) as the lost-lock callback.  Returns 0. */
RMUTEX_API int rmutex_set_lost_callback(rmutex_lost_fn fn, void *arg);

/* Called when this process finds Redis unreachable (down = 1: a connection
 * could not be made; detail says why, without a password) and when it
 * reaches it again (down = 0, detail ""), once per change, from whichever
 * thread noticed it, with no lock held.  Waiting calls go on waiting (lock),
 * or time out (timedlock); this only tells.  The callback must not block
 * for long. */
typedef void (*rmutex_outage_fn)(int down, const char *detail, void *arg);

/* Install fn (NULL: none) as the outage callback.  Returns 0. */
RMUTEX_API int rmutex_set_outage_callback(rmutex_outage_fn fn, void *arg);

/* Release the lock called name whoever holds it, and clear its robust state
 * (the owner-died and not-recoverable marks).  The fencing counter is kept.
 * Waiters are woken.  A holder in any process finds out at its next renewal
 * (lost-lock callback) or unlock (EPERM).  For operators.
 * Returns 0 (also when it was not held); EINVAL for a bad name; ETIMEDOUT
 * (Redis not reached within the command timeout) or an acquire error code. */
RMUTEX_API int rmutex_force_unlock(const char *name);

/* The same, only when owner_id (an owner id as rmutex_owner_id() gives it;
 * NULL: whoever) holds the lock -- a compare-and-delete, so an operator
 * never breaks a hold taken after they looked -- and telling who held it:
 * the holder's owner id goes into holder (holder_size bytes, may be NULL;
 * "" when the lock was free).  Returns 0 released; ENOENT it was free;
 * ESRCH held by someone else (nothing done); else as rmutex_force_unlock. */
RMUTEX_API int rmutex_force_unlock_owner(const char *name, const char *owner_id, char *holder,
                                         size_t holder_size);

/* What Redis says of a lock, read without taking or changing anything (the
 * rmutex command's status and wait).  Read on the primary that serves the
 * name. */
#define RMUTEX_INSPECT_QUEUE 5
#define RMUTEX_INSPECT_READERS 5

/* One reader of a read-write lock: a process of this library (one
 * however many of its threads read), or a Redisson client's reading
 * thread. */
typedef struct rmutex_readerinfo {
    char owner[64];           /* the owner id of its lowest reading thread,
                                 "<uuid>:<thread>" (Redisson's: its field) */
    unsigned holds;           /* its reading threads (Redisson's: its read count) */
    int64_t ttl_ms;           /* its read lease left; -1 unknown */
    /* Its process, from the holder registry, as the holder_* fields of
     * rmutex_lockinfo_t say a holder's. */
    int holder_known;
    long holder_pid;
    char holder_host[64];
    char holder_exe[256];
    char holder_cmd[256];
    char holder_lib[16];
    int64_t held_ms;          /* how long its process has read; -1 unknown */
} rmutex_readerinfo_t;

typedef struct rmutex_lockinfo {
    int held;                 /* 1: somebody holds it */
    unsigned holders;         /* fields in the lock hash (1 when held) */
    char owner[64];           /* the holder's owner id, "" when free */
    int64_t ttl_ms;           /* the hold's remaining lease; -1 when free */
    uint64_t fence;           /* the fencing counter: the last token given */
    int owner_died;           /* held: the hold descends from a holder that died
                                 (EOWNERDEAD); free: the next robust taker gets it */
    int not_recoverable;      /* the not-recoverable mark is set */
    unsigned queue_len;       /* fair waiters queued */
    unsigned queue_shown;     /* how many of them follow */
    char queue[RMUTEX_INSPECT_QUEUE][80];  /* the first, in order: "<owner>|<acquisition>" */
    int64_t queue_alive_ms[RMUTEX_INSPECT_QUEUE]; /* their liveness left */
    unsigned subscribers;     /* connections subscribed to its release channel
                                 (about one per process with waiters) */
    int64_t server_time_ms;   /* Redis TIME when it was read */
    /* The holder's process, from the holder registry: a process that holds
     * locks with this library says who it is in Redis (unless its
     * environment has RMUTEX_ANNOUNCE=0).  holder_known 0: only the owner
     * id above is known (another client, an old librmutex, opted out). */
    int holder_known;
    long holder_pid;
    char holder_host[64];
    char holder_exe[256];     /* its program, /proc/self/exe */
    char holder_cmd[256];     /* its command line, arguments space-separated */
    char holder_lib[16];      /* its librmutex version */
    int64_t held_ms;          /* how long the lock has been held; -1 unknown
                                 (a hold about a second old or less, or no
                                 registry entry) */
    int cached;               /* held by a process's cache (rmutexattr_setcache):
                                 RMUTEX_CACHED_KEPT (a thread of it may be
                                 inside; another process's lock asks for it),
                                 RMUTEX_CACHED_PARKED (nobody inside; another
                                 process's lock takes it over); 0 otherwise */
    /* Read-write locks (rrwlock_t).  A program built before these fields
     * reads a read-write lock through those above: held; holders, its
     * readers or its writer; owner, the writer or the first reader
     * described below; ttl_ms, the hash's lease; owner_died, a robust
     * writer's death; the queue, its waiters (readers and writers, in
     * order); subscribers, its channel's; the holder_* fields, the
     * writer's process or the first reader's. */
    int kind;                 /* RMUTEX_KIND_RWLOCK when Redis shows a read-write lock
                                 under the name (its hash's mode, its readers, its
                                 queue); RMUTEX_KIND_MUTEX otherwise -- also a free
                                 read-write lock whose keys are all gone: nothing in
                                 Redis tells it from a free mutex */
    int mode;                 /* a read-write lock's: RMUTEX_RW_FREE, RMUTEX_RW_READ,
                                 RMUTEX_RW_WRITE; RMUTEX_RW_FREE for a mutex */
    unsigned readers;         /* readers: this library's processes reading (one
                                 each, however many threads) and Redisson's
                                 reading threads */
    unsigned readers_shown;   /* how many of them follow */
    rmutex_readerinfo_t reader[RMUTEX_INSPECT_READERS];
    char queue_mode[RMUTEX_INSPECT_QUEUE]; /* each waiter of queue[] above: 'r' a
                                 reader, 'w' a writer (a mutex's: 0) */
    unsigned queued_readers;  /* the read-write lock's waiters of each kind */
    unsigned queued_writers;
} rmutex_lockinfo_t;

enum { RMUTEX_CACHED_KEPT = 1, RMUTEX_CACHED_PARKED = 2 };
enum { RMUTEX_KIND_MUTEX = 0, RMUTEX_KIND_RWLOCK = 1 };
enum { RMUTEX_RW_FREE = 0, RMUTEX_RW_READ = 1, RMUTEX_RW_WRITE = 2 };

/* Fill *info (size: sizeof(rmutex_lockinfo_t) as the caller knows it) for
 * the lock called name, a mutex or a read-write lock.  Returns 0; EINVAL
 * for a bad name, NULL, or a key of another type under the name
 * (WRONGTYPE); ETIMEDOUT when Redis was not reached in the command
 * timeout; EACCES refused; ENOMEM. */
RMUTEX_API int rmutex_inspect(const char *name, rmutex_lockinfo_t *info, size_t size);

/* Visit the locks whose names match pattern (a Redis glob; NULL: "*"):
 * fn(name, info, arg) for each held lock found, mutex or read-write lock,
 * with what rmutex_inspect says of it; a nonzero return from fn stops the
 * walk and is returned.  It SCANs every primary's whole keyspace (O(keys),
 * never KEYS), so it is for operators, not for hot paths.  A free lock has
 * no keys in Redis and is not seen; a hash only counts as a lock when it
 * has a lease and its field is an owner id (a read-write lock: its mode is
 * read or write).  A lock taken or released during the walk may or
 * may not be seen.  Returns 0, fn's value, or as rmutex_inspect (EACCES
 * also when SCAN is not allowed). */
typedef int (*rmutex_list_fn)(const char *name, const rmutex_lockinfo_t *info, void *arg);
RMUTEX_API int rmutex_list(const char *pattern, rmutex_list_fn fn, void *arg);

/* What Redis shows of the semaphore called name, without taking a permit
 * (rmutex status): its free value, the processes that hold permits, each
 * with its permits, its lease left and, from the holder registry, its
 * host, pid and program (rmutex_readerinfo_t: owner "<process-uuid>:0",
 * holds its permits, ttl_ms its lease left), and the fair queue's length.
 * size: sizeof(rsem_info_t) as the caller knows it.  0; EINVAL (NULL, a bad
 * name, a key of another type); ETIMEDOUT, EACCES, ENOMEM as rmutex_inspect. */
#define RSEM_INSPECT_HOLDERS 16
typedef struct rsem_info {
    int exists;               /* 0: there is no semaphore of that name */
    int value;                /* the free permits */
    unsigned lapsed;          /* permits of processes whose lease passed, not yet
                                 given back (the next call on the name does) */
    unsigned processes;       /* processes holding permits */
    unsigned shown;           /* how many of them follow */
    unsigned queued;          /* fair waiters */
    int64_t server_time_ms;
    rmutex_readerinfo_t holder[RSEM_INSPECT_HOLDERS];
} rsem_info_t;
RMUTEX_API int rsem_inspect(const char *name, rsem_info_t *info, size_t size);

/* One thread's wait, as its process announces it in the holder registry:
 * a wait (for a mutex, a fair mutex, a read or write of a read-write lock,
 * a condition variable, a semaphore, a barrier, a once) that has lasted longer than the announce_wait
 * setting (100 ms), while it lasts (an ended wait drops out within about
 * 50 ms; its process's entry within two leases of its death). */
typedef struct rmutex_waitinfo {
    char owner[64];           /* the waiting thread's owner id, "<uuid>:<thread>" */
    char name[RMUTEX_NAME_MAX + 1]; /* the lock's (or condition variable's) name */
    char kind;                /* RMUTEX_WAIT_MUTEX, _FAIR, _READ, _WRITE, _COND, _SEM,
                                 _BARRIER, _ONCE */
    int detect;               /* its mutex gives up on a deadlock
                                 (rmutexattr_setdeadlock_detect) */
    int64_t waited_ms;        /* how long it has waited, by server time */
    /* Its process, as rmutex_lockinfo_t's holder_* fields say a holder's. */
    long pid;
    char host[64];
    char exe[256];
    char cmd[256];
    char lib[16];
} rmutex_waitinfo_t;

enum {
    RMUTEX_WAIT_MUTEX = 'm', RMUTEX_WAIT_FAIR = 'f', RMUTEX_WAIT_READ = 'r',
    RMUTEX_WAIT_WRITE = 'w', RMUTEX_WAIT_COND = 'c',
    /* a semaphore's permits (rsem_*wait*), a barrier (rbarrier_*wait),
     * a ronce that another caller runs: no one thread holds what they
     * wait for, so they are no edge of the wait-for graph */
    RMUTEX_WAIT_SEM = 's', RMUTEX_WAIT_BARRIER = 'b', RMUTEX_WAIT_ONCE = 'o'
};

/* Visit the announced waits: fn(wait, arg) for each wait for name (NULL:
 * every wait), in no particular order; a nonzero return from fn stops the
 * walk and is returned.  Like rmutex_list it SCANs every primary (for the
 * processes' registry entries, rmutex_client:{<uuid>}), for operators
 * (`rmutex status`, `rmutex deadlocks`).  Returns 0, fn's value, or as
 * rmutex_list. */
typedef int (*rmutex_waits_fn)(const rmutex_waitinfo_t *wait, void *arg);
RMUTEX_API int rmutex_waits(const char *name, rmutex_waits_fn fn, void *arg);

/* Stop this process's rmutex threads and close its connections; the next
 * call starts them again, and rmutex_configure() may be called again.
 * Returns 0, or EBUSY if a thread holds or waits for a mutex (nothing is
 * changed). */
RMUTEX_API int rmutex_shutdown(void);

/* Why the calling thread's last failing call failed, or "" (never NULL, never
 * a password).  A call that succeeds can leave a warning here too: the first
 * connection reports a maxmemory-policy other than noeviction.  The string
 * is thread-local and valid until the thread's next rmutex call. */
RMUTEX_API const char *rmutex_detail(void);

/* A distribution of durations in log2 buckets of microseconds: bucket[i]
 * counts the durations d with 2^(i-1) <= d < 2^i us (bucket[0]: under
 * 1 us; the last bucket also counts everything longer); count is their
 * number and sum_us their total. */
#define RMUTEX_HISTOGRAM_BUCKETS 32
typedef struct rmutex_histogram {
    uint64_t count;
    uint64_t sum_us;
    uint64_t bucket[RMUTEX_HISTOGRAM_BUCKETS];
} rmutex_histogram_t;

/* Counters of this process since it started (or since fork() in a child).
 * The gauges at the end are current values. */
typedef struct rmutex_stats {
    uint64_t acquisitions;       /* holds granted by Redis (recursive relocks not counted) */
    uint64_t contended;          /* acquisitions that had to wait */
    uint64_t wakeups_pubsub;     /* waits ended by a release message */
    uint64_t wakeups_subscribe;  /* waits ended by a (re)subscription */
    uint64_t wakeups_poll;       /* waits ended by their time bound */
    uint64_t renewals;           /* leases renewed by the watchdog */
    uint64_t renewal_calls;      /* renewal script calls (many leases each) */
    uint64_t renewal_failures;   /* renewal calls that failed and were retried */
    uint64_t locks_lost;         /* holds found gone (lost-lock callbacks) */
    uint64_t reconnects;         /* connections dialled again after a failure */
    uint64_t subscribes;         /* channel subscriptions confirmed */
    uint64_t unsubscribes;       /* channel subscriptions dropped */
    uint64_t indeterminate;      /* requests whose reply was lost, then resolved */
    uint64_t script_loads;       /* scripts loaded after NOSCRIPT */
    uint64_t round_trips;        /* command round trips made by calling threads */
    uint64_t replica_shortfalls; /* WAITs acknowledged by too few replicas */
    uint64_t deferred_releases;  /* releases handed to the watchdog to retry */
    uint64_t held;               /* gauge: holds this process has now */
    uint64_t waiting;            /* gauge: threads waiting for a lock now */
    uint64_t channels;           /* gauge: subscribed channels */
    uint64_t connections;        /* gauge: open command connections */
    uint64_t pubsub_connections; /* gauge: open pub/sub connections */
    /* Redis Cluster (0 elsewhere): */
    uint64_t redirects_moved;    /* MOVED answers followed */
    uint64_t redirects_ask;      /* ASK answers followed */
    uint64_t cluster_retries;    /* TRYAGAIN/CLUSTERDOWN/LOADING/MASTERDOWN answers */
    uint64_t map_refreshes;      /* slot map (or Sentinel) refreshes */
    uint64_t resubscribes_moved; /* waiters moved to a channel's new node */
    uint64_t renewal_rounds;     /* watchdog round trips (one pipeline to one node each) */
    /* Condition variables: */
    uint64_t cond_waits;         /* rcond_*wait calls that waited */
    uint64_t cond_signals;       /* rcond_signal calls that woke a waiter */
    uint64_t cond_broadcasts;    /* rcond_broadcast calls that woke waiters */
    uint64_t cond_spurious;      /* waits that returned 0 unsignalled (lost entry) */
    uint64_t cache_hits;         /* locks of a cached mutex served by the cache: no round trip */
    uint64_t cache_starts;       /* caches begun (an acquisition in Redis by the process) */
    uint64_t cache_returns;      /* caches given back at an unlock (asked for, or not
                                    recoverable; the others end by the keeper, a loss, a
                                    thread's exit, the process's exit or a shutdown) */
    uint64_t cache_requests;     /* requests for a cached lock heard from other clients
                                    (a waiter of a fair lock asks at each of its tries) */
    uint64_t cache_parks;        /* unused caches parked in Redis (another process may take
                                    the lock over at once; the next local lock takes it back) */
    uint64_t releases_unconfirmed; /* unlocks answered EPERM because a try whose reply was
                                    lost went to a server that has restarted since: the
                                    release may have run, or the restart wiped the hold
                                    first; nothing can tell (docs/api.md) */
    uint64_t holds_checked;      /* holds checked at once after a connection to their
                                    server dropped (a restart is found within about a
                                    second of the server answering, not at lease/3) */
    uint64_t announcements;      /* holder-registry calls (announce.lua): who the process
                                    is, what it holds, which of its waits last */
    uint64_t waits_announced;    /* waits listed in the registry (they lasted longer than
                                    announce_wait) */
    /* Appended later (a program built against the older header passes the
     * smaller size and gets the fields above only).  Mutexes feed these (non-fair, fair and cached;
     * not read-write locks, semaphores, barriers or once): */
    uint64_t uncontended;        /* mutex acquisitions that did not wait */
    rmutex_histogram_t wait_time; /* mutex acquisitions that waited: rmutex_*lock called ->
                                    returned with the lock */
    rmutex_histogram_t hold_time; /* mutex holds: lock returned -> unlock called */
    uint64_t fair_handoffs_local; /* fair hand-offs to a thread of this process that its
                                     releasing thread woke itself, with the grant its
                                     release answered (no pub/sub hop) */
    uint64_t cond_signals_local;  /* signals to a waiting thread of this process that the
                                     signalling thread woke itself, with the message its
                                     signal answered (no pub/sub hop) */
} rmutex_stats_t;

/* Copy the counters into *out.  size is sizeof(rmutex_stats_t) as the
 * caller knows it; only that many bytes are written, so programs built
 * against an older header keep working.  Returns 0, or EINVAL for NULL. */
RMUTEX_API int rmutex_stats(rmutex_stats_t *out, size_t size);

/* One process's counters of one lock name, as it publishes them in the
 * holder registry (every process that uses rmutex, on its periodic
 * registry call: about a second after a new hold, then every lease/3
 * while it holds or waits; they lapse with its entry, two leases after
 * its last write).  A process publishes its RMUTEX_METRICS_NAMES busiest
 * names (most acquisitions) and one more series, name "", for all its
 * other names together; fields as rmutex_stats_t's, counted since the
 * process started. */
#define RMUTEX_METRICS_NAMES 64
typedef struct rmutex_metricinfo {
    char name[RMUTEX_NAME_MAX + 1]; /* the lock's name; "": the process's other names */
    uint64_t acquisitions;
    uint64_t contended;
    uint64_t uncontended;
    uint64_t locks_lost;
    uint64_t renewals;
    rmutex_histogram_t wait_time;
    rmutex_histogram_t hold_time;
    int64_t published_ms;     /* the server's time of the process's last write */
    int64_t server_time_ms;   /* the server's time when this was read */
    char process[64];         /* the process's uuid (its owner ids' first part) */
    /* The process, as rmutex_waitinfo_t's fields say it. */
    long pid;
    char host[64];
    char exe[256];
    char cmd[256];
    char lib[16];
} rmutex_metricinfo_t;

/* Visit every process's published counters: fn(series, arg) for each
 * process and name, in no particular order; a nonzero return from fn
 * stops the walk and is returned.  SCANs every primary as rmutex_waits
 * does (`rmutex stats`, `rmutex top`).  Returns 0, fn's value, or as
 * rmutex_list. */
typedef int (*rmutex_metrics_fn)(const rmutex_metricinfo_t *series, void *arg);
RMUTEX_API int rmutex_metrics(rmutex_metrics_fn fn, void *arg);

/* Debug log: setting the environment variable RMUTEX_DEBUG to 1 (stderr) or
 * to a file path makes the library log its connections, subscriptions,
 * renewals and failures there.  Nothing is printed otherwise. */

#ifdef __cplusplus
}
#endif

#endif /* RMUTEX_H */
