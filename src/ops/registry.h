/* registry.h -- the holder registry: who a lock's holder is, beyond its
 * owner id (rmutex status). */
#ifndef RM_REGISTRY_H
#define RM_REGISTRY_H

#include <stddef.h>

#include "clock.h"
#include "internal.h"

struct redisReply;

/* At most this many holds are listed in one process's entry. */
#define RM_REGISTRY_HOLDS 100
/* At most this many names' counters are published by one process (the
 * busiest; the others' together as one more). */
#define RM_REGISTRY_NAMES 64
/* The most field/value pairs rm_registry_describe gives. */
#define RM_REGISTRY_PAIRS 6

/* 0 when the environment says RMUTEX_ANNOUNCE=0 (read once per process). */
int rm_registry_enabled(void);

/* The registry key of the process whose owner id ("<uuid>:<tid>", a fair
 * waiter's "<uuid>:<tid>|<acquisition>", a read-write lock's writer's field
 * "<uuid>:<tid>:write") is owner, into buf.  Returns
 * its length, 0 when owner has no such form or buf is too small. */
size_t rm_registry_key(const char *owner, char *buf, size_t size);

/* The text of a process's description. */
struct rm_registry_text {
    char host[256], pid[24], exe[256], cmd[256], start[24];
};

/* This process as announce.lua stores it: field/value pairs (host, pid,
 * exe, cmd, lib, start) into argv/lens, their text kept in *t.  Returns
 * the number of pairs. */
int rm_registry_describe(struct rm_registry_text *t, const char **argv, size_t *lens);

/* The watchdog's hook (rm_watchdog_on_hold), with its lock held: a hold
 * of owner on ep was added -- announce the process at once if it is its
 * first on ep, else within about a second. */
struct rm_endpoint;
void rm_registry_hold_added(struct rm_endpoint *ep, const char *owner, size_t owner_len);

/* ---- waiters (a wait longer than the announce_wait setting) ---- */

/* One thread's wait, kept by the waiting thread (on its stack) between
 * rm_registry_wait_begin and rm_registry_wait_end.  The caller fills ep,
 * owner (the thread's owner id, "<uuid>:<tid>"), lock (the lock's name),
 * kind (RM_REGISTRY_WAIT_*) and detect (the thread breaks a deadlock it
 * closes: rmutexattr_setdeadlock_detect); the rest is the registry's. */
struct rm_registry_wait {
    struct rm_endpoint *ep;
    const char *owner, *lock;
    char kind;
    int detect;
    rm_nsec deadline;  /* a timed wait's deadline (the caller's; 0 or RM_FOREVER: none) */
    rm_nsec since;     /* when the wait began */
    int announced;     /* a call that lists it was built */
    struct rm_registry_wait *next, *prev;
};
#define RM_REGISTRY_WAIT_MUTEX 'm'
#define RM_REGISTRY_WAIT_FAIR 'f'
#define RM_REGISTRY_WAIT_READ 'r'
#define RM_REGISTRY_WAIT_WRITE 'w'
#define RM_REGISTRY_WAIT_COND 'c'
#define RM_REGISTRY_WAIT_SEM 's'
#define RM_REGISTRY_WAIT_BARRIER 'b'
#define RM_REGISTRY_WAIT_ONCE 'o'
/* Whether a wait of kind k is for something one thread holds (an edge of
 * the wait-for graph): a mutex's, a read-write lock's. */
#define RM_REGISTRY_WAIT_FOR_HOLDER(k) ((k) == 'm' || (k) == 'f' || (k) == 'r' || (k) == 'w')

/* The wait w begins: listed in this process (no Redis call), announced
 * with the process's entry once it has lasted announce_wait ms.  Nothing
 * when announcing is off (RMUTEX_ANNOUNCE=0, announce_wait=0). */
void rm_registry_wait_begin(struct rm_registry_wait *w);
/* It ends: unlisted; if it was announced, the entry is rewritten soon
 * (RM_REGISTRY_WAIT_GONE_MS) without it. */
void rm_registry_wait_end(struct rm_registry_wait *w);
#define RM_REGISTRY_WAIT_GONE_MS 50
/* It ends with r: 0 or EOWNERDEAD, it got what it waited for (as
 * rm_registry_wait_end: the rewrite announces the new hold too);
 * ETIMEDOUT at its deadline, which readers see pass (no call: the entry
 * drops it at its next write); else (EDEADLK, an error) it drops out at
 * the next regular write, within a period, which a process that holds
 * something (a member of a deadlock does) makes anyway.  So a wait that
 * ends without the lock costs no call beyond the one that listed it. */
void rm_registry_wait_ended(struct rm_registry_wait *w, int r);

/* How long a process's entry goes between two announcements while it
 * holds or waits (the default lease / 3), in ms. */
unsigned long rm_registry_period_ms(void);

/* fork(): -1 lock, 0 unlock, 1 child: no waits. */
void rm_registry_atfork(int who);

/* Where rm_registry_read puts what it read: the holder_* fields and
 * held_ms of a rmutex_lockinfo_t or of a rmutex_readerinfo_t
 * (RM_REGISTRY_FIELDS(p) makes it for either). */
struct rm_registry_fields {
    int *known;
    long *pid;
    int64_t *held_ms;
    char *host, *exe, *cmd, *lib;
    size_t host_size, exe_size, cmd_size, lib_size;
};
#define RM_REGISTRY_FIELDS(p)                                                                \
    { &(p)->holder_known, &(p)->holder_pid, &(p)->held_ms, (p)->holder_host, (p)->holder_exe, \
      (p)->holder_cmd, (p)->holder_lib, sizeof (p)->holder_host, sizeof (p)->holder_exe,      \
      sizeof (p)->holder_cmd, sizeof (p)->holder_lib }

/* whois.lua's reply into *f, the hold's age from server_time_ms.  Leaves
 * them unknown (known 0, held_ms -1) when the reply says nothing. */
void rm_registry_read(const struct redisReply *r, int64_t server_time_ms,
                      const struct rm_registry_fields *f);

/* A wait as announce.lua stores it ("wait:<owner>" = "<server ms it
 * began>|<kind>|<d or ->|<lock name>"), parsed: 0, or -1 when text is not
 * one. */
struct rm_registry_waitfield {
    long long since_ms;
    char kind;
    int detect;
    const char *lock;  /* into text */
    size_t lock_len;
};
int rm_registry_parse_wait(const char *text, size_t len, struct rm_registry_waitfield *out);

#endif
