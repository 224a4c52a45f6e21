/* policy.c -- what a ported program's distributed locks do, and say,
 * when rmutex cannot take a name: Redis unreachable, or refusing.
 *
 * DESIGN
 * ------
 * A ported program (the header swap, the preload shim) does not check what
 * pthread_mutex_lock returns: glibc never fails it.  So the distributed
 * part of a mutex (dmutex.c) never returns as if the lock were taken when
 * it is not: the local mutex is only ever taken after the name, so while
 * the name cannot be taken the program's threads wait too, in every
 * process.  What stops the name from being taken is one of two kinds, each
 * told on stderr in one line (say.c):
 *
 *   - an outage: no connection to Redis could be made.  lock waits until
 *     Redis answers, trylock says EBUSY, the timed forms time out.  One
 *     line when it starts, one when Redis answers again, at most one
 *     outage line per RATE_S seconds.  RMUTEX_OUTAGE_LINES=0 silences both.
 *   - an error: anything else that no pthread call answers -- a bad or
 *     misspelt RMUTEX_URL, a refused login, an ACL without a command the
 *     library needs, a server that is a replica...  Its line names it
 *     (rmutex_detail() and the errno name) and is said once: the same
 *     problem again is not said again (a small table of what was said,
 *     by a hash of code and detail).  Then RMUTEX_ON_ERROR decides:
 *       wait   (the default) as in an outage: lock waits, asking again
 *              (dmutex.c: backoff to a second), trylock EBUSY, timed forms
 *              ETIMEDOUT -- so a login or an ACL fixed on the server heals
 *              the program without a restart;
 *       abort  the line, then abort(3).  The one place a ported program
 *              is ended by rmutex: the user asked for it.
 *     Any other value is said once and "wait" applies.
 *
 * Each line names what waits: the kinds of lock the program has made
 * distributed so far (rm_policy_uses) -- mutexes, read-write locks, or
 * both -- since an outage or a refusal holds up every one of them.
 *
 * The environment is read at the first trouble.  A lock that Redis
 * answers costs two relaxed atomic loads here (is an outage on? is its
 * kind known?). */
#include "policy.h"
#include "say.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RATE_S 10
#define SAID_MAX 16

static struct {
    pthread_mutex_t mu;        /* everything below but down */
    int down;                  /* an outage is on (read without mu) */
    int down_said;             /* ... and its line was said */
    int64_t last_down_line;    /* CLOCK_MONOTONIC seconds */
    uint64_t said[SAID_MAX];   /* errors said: hashes of code and detail */
    unsigned nsaid;
    int env_read, abort_on_error, outage_lines;
    int kinds;                 /* RM_POLICY_*: what is distributed (atomic) */
} pol = { .mu = PTHREAD_MUTEX_INITIALIZER };

void rm_policy_uses(int kinds)
{
    if ((__atomic_load_n(&pol.kinds, __ATOMIC_RELAXED) & kinds) != kinds)
        __atomic_fetch_or(&pol.kinds, kinds, __ATOMIC_RELAXED);
}

/* What waits, for the lines: "distributed mutexes", "distributed mutexes
 * and read-write locks", "distributed mutexes, read-write locks and
 * semaphores"... */
#define WAITING_MAX 96
static const char *waiting(char line[WAITING_MAX])
{
    static const char *const kind[] = { "mutexes", "read-write locks", "semaphores", "barriers" };
    int kinds = __atomic_load_n(&pol.kinds, __ATOMIC_RELAXED), n = 0, total = 0;
    for (int k = kinds; k; k &= k - 1) total++;
    if (!total) return "distributed locks";
    size_t used = (size_t)snprintf(line, WAITING_MAX, "distributed ");
    for (int i = 0; i < 4; i++) {
        if (!(kinds & 1 << i)) continue;
        n++;
        const char *sep = n == 1 ? "" : n == total ? " and " : ", ";
        used += (size_t)snprintf(line + used, WAITING_MAX - used, "%s%s", sep, kind[i]);
    }
    return line;
}

/* fork(): a thread of the parent may have held the lock; the child's only
 * thread starts with it free (the state it guarded stays). */
static void fork_child(void) { pthread_mutex_init(&pol.mu, NULL); }

__attribute__((constructor)) static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

static void read_env_locked(void)
{
    if (pol.env_read) return;
    pol.env_read = 1;
    const char *e = getenv("RMUTEX_ON_ERROR");
    pol.abort_on_error = e && !strcmp(e, "abort");
    if (e && *e && !pol.abort_on_error && strcmp(e, "wait"))
        rm_say("RMUTEX_ON_ERROR=%.64s is neither wait nor abort: wait applies", e);
    e = getenv("RMUTEX_OUTAGE_LINES");
    pol.outage_lines = !(e && !strcmp(e, "0"));
}

void rm_policy_answered(void)
{
    char what[WAITING_MAX];
    if (!__atomic_load_n(&pol.down, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&pol.mu);
    int say = __atomic_exchange_n(&pol.down, 0, __ATOMIC_RELAXED) && pol.down_said;
    pol.down_said = 0;
    pthread_mutex_unlock(&pol.mu);
    if (say) rm_say("Redis answers again: %s no longer wait", waiting(what));
}

void rm_policy_outage(const char *detail)
{
    char what[WAITING_MAX];
    pthread_mutex_lock(&pol.mu);
    read_env_locked();
    int say = 0;
    if (!__atomic_exchange_n(&pol.down, 1, __ATOMIC_RELAXED)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        say = pol.outage_lines && (!pol.last_down_line || ts.tv_sec - pol.last_down_line >= RATE_S);
        if (say) pol.last_down_line = ts.tv_sec;
        pol.down_said = say;
    }
    pthread_mutex_unlock(&pol.mu);
    if (say)
        rm_say("Redis is unreachable (%s); %s wait until it answers again",
               detail && *detail ? detail : "no detail", waiting(what));
}

static uint64_t hash_of(int code, const char *s)
{
    uint64_t h = 14695981039346656037ull ^ (uint64_t)(unsigned)code; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void rm_policy_error(int code, const char *detail)
{
    char what[WAITING_MAX];
    if (!detail || !*detail) detail = "no detail";
    uint64_t h = hash_of(code, detail);
    pthread_mutex_lock(&pol.mu);
    read_env_locked();
    int said = 0;
    for (unsigned i = 0; i < pol.nsaid && i < SAID_MAX && !said; i++) said = pol.said[i] == h;
    if (!said) pol.said[pol.nsaid++ % SAID_MAX] = h;
    int abort_now = pol.abort_on_error;
    pthread_mutex_unlock(&pol.mu);
    if (said) return;
    const char *name = strerrorname_np(code);
    char num[16];
    if (!name) {
        snprintf(num, sizeof num, "error %d", code);
        name = num;
    }
    if (abort_now) {
        rm_say("cannot use Redis: %s (%s); RMUTEX_ON_ERROR=abort: ending the program", detail, name);
        abort();
    }
    rm_say("cannot use Redis: %s (%s); %s wait, asking again, until that is fixed "
           "(RMUTEX_ON_ERROR=abort ends the program instead)", detail, name, waiting(what));
}
