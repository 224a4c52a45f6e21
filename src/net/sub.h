/* sub.h -- the subscription multiplexer: one pub/sub connection and one
 * thread per endpoint, waking the threads that wait for locks. */
#ifndef RM_SUB_H
#define RM_SUB_H

#include <pthread.h>
#include <stddef.h>

#include "clock.h"
#include "conn.h"

struct rm_sub;
struct rm_channel;

/* Why a wait ended. */
enum {
    RM_WAKE_TIMEOUT = 0,    /* its time bound passed: poll */
    RM_WAKE_MESSAGE = 1,    /* a release message for this waiter */
    RM_WAKE_SUBSCRIBED = 2, /* the channel was (re)subscribed: re-check */
    RM_WAKE_REFUSED = 3,    /* Redis refused to subscribe it (ACL NOPERM):
                               no release will ever be heard; give up */
    RM_WAKE_MOVED = 4,      /* cluster: the channel is no longer served
                               here (slot moved, failover, connection
                               lost): re-check, and join it again where it
                               is served now (rm_endpoint_rejoin) */
    RM_WAKE_LOOK = 5,       /* told to re-check (rm_sub_poke) */
};

/* What a sharded multiplexer learns of the topology, told to the endpoint
 * (from the multiplexer's thread, no lock held): moved is the text of a
 * MOVED answer to SSUBSCRIBE, or NULL when a subscription was taken away
 * by the server or the connection broke -- the map may be stale. */
struct rm_topo_hook {
    void (*fn)(void *arg, const char *moved, size_t len);
    void *arg;
};

/* A thread waiting on a channel.  It lives on the waiter's stack; the
 * fields are the multiplexer's, under its lock. */
struct rm_waiter {
    struct rm_waiter *next, *prev;
    struct rm_channel *ch;
    struct rm_sub *sub;
    pthread_cond_t cv;
    int woken;         /* RM_WAKE_* not yet consumed, or 0 */
    int moved;         /* RM_WAKE_MOVED not yet consumed: told after a
                          message kept in woken, never lost behind it */
    const char *match; /* wake only for a message that is this, or this and
                          a space and more (or, on a condition's channel,
                          for a broadcast "*..."); NULL: for "0" */
    size_t match_len;
    int releases;      /* also woken by "0" (one) and "1" (all): rm_sub_join_releases */
    unsigned long seq; /* its join's number on the channel (rm_sub_rank) */
    char msg[128];     /* the message that woke it (match only), NUL-ended */
    /* A notified waiter (rm_sub_join_notify) sleeps nowhere: each wake-up
     * calls notify(arg, why) instead, on the multiplexer's thread with its
     * lock held -- it must only set state and signal, never block. */
    void (*notify)(void *arg, int why);
    void *notify_arg;
};

/* A multiplexer for the server at addr (kept by reference: it must outlive
 * the multiplexer), telling reach whether each of its dials got through.
 * sharded: a cluster node's (SSUBSCRIBE, one channel per command, and
 * hook is told what it learns of the topology).  Its thread starts with
 * the first join.  0 or ENOMEM. */
int rm_sub_create(const struct rm_server_addr *addr, struct rm_reach reach, int sharded,
                  struct rm_topo_hook hook, struct rm_sub **out);
/* Stop the thread and free everything.  No waiter may be joined. */
void rm_sub_destroy(struct rm_sub *sub);

/* Register w on channel (subscribing it, and starting the multiplexer
 * thread, if needed).  From now on no message for w is lost while the
 * subscription stands: it is kept in w->woken until rm_sub_wait.
 * match: NULL to be woken by "0" (one waiter per message), or the prefix
 * of the messages that wake this waiter only; the message is then copied
 * into w->msg.  Returns 0, ENOMEM or EAGAIN. */
int rm_sub_join(struct rm_sub *sub, const char *channel, struct rm_waiter *w, const char *match,
                size_t match_len);

/* The same for a waiter that is told instead of woken: notify(arg, why)
 * for each message that matches and each RM_WAKE_* event, until
 * rm_sub_leave (after which it is never called again). */
/* rm_sub_join for a read-write lock's waiter: woken by its match, and by
 * the release messages of Redisson's read-write lock too ("0": one such
 * waiter, "1": every one). */
int rm_sub_join_releases(struct rm_sub *sub, const char *channel, struct rm_waiter *w,
                         const char *match, size_t match_len);

int rm_sub_join_notify(struct rm_sub *sub, const char *channel, struct rm_waiter *w,
                       const char *match, size_t match_len, void (*notify)(void *arg, int why),
                       void *arg);

/* Deliver msg on channel as if the server had sent it (a message this
 * process published itself and knows the text of: fair.c's grants to its
 * own threads).  How many waiters it woke that no message had woken yet
 * (0: none here, or the server's copy came first). */
int rm_sub_deliver(struct rm_sub *sub, const char *channel, const char *msg, size_t len);

/* The server is no longer the primary: wake every waiter with
 * RM_WAKE_MOVED, to re-check and join again where the lock is served. */
void rm_sub_move_all(struct rm_sub *sub);

/* The channel w is joined to. */
const char *rm_sub_channel(const struct rm_waiter *w);

/* 0 if w has waited on its channel longest (of the waiters that sleep),
 * else how many joined the channel after that one and up to w: at least
 * w's place in line, more when some in between have left.  O(1). */
unsigned long rm_sub_rank(struct rm_waiter *w);

/* Wake w to look again (RM_WAKE_LOOK), as a message would. */
void rm_sub_poke(struct rm_waiter *w);

/* Set the detail for a wait ended by RM_WAKE_REFUSED; returns EACCES. */
int rm_sub_refused(const struct rm_waiter *w);

/* Wait until w is woken or deadline.  Returns RM_WAKE_*, counting it in the
 * stats, and consumes the wake-up.  A message comes first; a move of the
 * channel that came with it is the next wait's answer, at once. */
int rm_sub_wait(struct rm_waiter *w, rm_nsec deadline);

/* The same, with the sleep a cancellation point: cancel_state (the
 * caller's own, PTHREAD_CANCEL_ENABLE or _DISABLE) is in force while the
 * thread sleeps, and cancellation is disabled again around everything
 * else.  (A condition wait is a cancellation point; the library's other
 * calls are not.) */
int rm_sub_wait_cancellable(struct rm_waiter *w, rm_nsec deadline, int cancel_state);

/* Unregister w.  The channel stays subscribed for the idle time. */
void rm_sub_leave(struct rm_waiter *w);

/* fork(): -1 prepare (lock), 0 parent (unlock), 1 child (start empty). */
void rm_sub_atfork(struct rm_sub *sub, int who);

#endif
