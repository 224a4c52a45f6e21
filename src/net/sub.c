/* sub.c -- the subscription multiplexer.
 *
 * DESIGN
 * ------
 * Each node (a plain server, a cluster's primary, Sentinel's primary) has
 * one pub/sub connection and one thread that owns it.
 * Threads waiting for a lock never touch it: they register a waiter (a
 * struct on their own stack) on the lock's channel and sleep on the
 * waiter's condition variable; the thread reads messages and wakes them.
 * So one connection carries every channel of the process, and the number of
 * subscriptions grows with the number of contended locks, not of waiting
 * threads.
 *
 * Channels are reference counted by their waiters.  A channel nobody waits
 * on stays subscribed for the idle time (URL option idle, 10 s), so steady
 * contention does not churn SUBSCRIBE/UNSUBSCRIBE.  Joins and leaves only
 * change the table and poke the thread through an eventfd; the thread
 * sends SUBSCRIBE / UNSUBSCRIBE for the differences, many channels per
 * command.
 *
 * Pub/sub is at-most-once: messages published while the connection is
 * down, or before a subscription is confirmed, are lost.  Two rules make
 * that harmless.  (1) Every wait is bounded by its caller (the lock's
 * remaining lease and the poll cap; a fair lock's waiters queued behind
 * their process's first, by a longer last resort, fair.c), so a lost
 * message costs time, never liveness.  (2) Whenever a channel's subscription is confirmed, first time
 * or after a reconnect, every waiter of that channel is woken to re-check
 * the lock at once: a release it missed is found by that check.  A waiter
 * joins before the attempt that finds the lock busy, and a wake-up that
 * arrives before it sleeps is kept in the waiter, so nothing is lost
 * between the check and the sleep.
 *
 * A release message ("0", Redisson's) wakes one waiter of that channel in
 * this process; a waiter registered with a match is woken only by exactly
 * that message (the fair lock names the thread it hands the lock to, a
 * condition's signal the waiter it picked), and a condition's broadcast
 * ("*" and the cut) wakes every waiter of its channel.  A waiter that
 * listens for releases too (a read-write lock's: rm_sub_join_releases) is
 * also woken by a "0" as an unmatched one is, and with every other such
 * waiter by a "1" (Redisson's read-write lock left by a writer).  A waiter can also
 * be poked to re-check (rm_sub_poke: the watchdog does, for a fair waiter
 * whose place in the queue is gone), and asked about its place in line
 * (rm_sub_rank, by join numbers, O(1): a fair lock's process keeps only
 * its longest waiter looking often).  In a cluster a waiter is also told
 * when its channel is no longer served by this node (RM_WAKE_MOVED: the
 * server took it away, the connection broke), to join it where it is
 * served now; that news is kept apart from a message the waiter has not
 * used yet, and is its next wait's answer -- dropped for the message, it
 * would leave the waiter listening where nothing is published any more,
 * found only by its next poll.  A notified waiter (a cached lock's
 * ear for requests, cache.c) is not a sleeping thread: its wake-ups are
 * calls of its notify function, made under the lock.
 *
 * A message can also come from this process (rm_sub_deliver): a fair
 * lock's release that granted the lock to a thread of its own process
 * gets the grant's text in its reply and hands it over here, as if read
 * from the connection -- the same text, so the same rules decide what the
 * woken thread may do with it.  Whichever copy comes first wakes it (the
 * server writes the PUBLISH during the script, before the reply, and this
 * thread may read it first); the other finds the waiter gone or already
 * woken by it: a message is never more than a reason to look, and a
 * grant's own token tells a repeat from news (fair.c). 
 *
 * The connection is kept alive with PING (every 5 s, dropped if no answer
 * within 5 s) and re-dialled with jittered backoff (20 ms doubling to 1 s)
 * when it breaks.  The thread blocks every signal.  Over TLS the thread
 * polls the socket as over TCP: conn.c reads until OpenSSL holds no
 * plaintext, so nothing waits where poll() cannot see it.
 *
 * Servers differ in what an UNSUBSCRIBE gets when the connection is no
 * longer subscribed to anything: Redis answers as usual, Valkey 8.0.0-8.0.1
 * with a -NOSUB error.  A channel the server refused is never unsubscribed,
 * and a -NOSUB is set aside: it answers no SUBSCRIBE. */
#include "sub.h"
#include "conn.h"
#include "internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define NBUCKETS 1024
#define PING_EVERY RM_MSEC(5000)
#define PING_TIMEOUT RM_MSEC(5000)

enum { CH_NEW, CH_SENT, CH_SUBSCRIBED, CH_REFUSED, CH_MOVED };

struct rm_channel {
    struct rm_channel *hnext;
    struct rm_waiter *head, *tail;
    unsigned refs;
    unsigned long joins;     /* waiters ever joined (their seq) */
    int state;
    rm_nsec idle_since;
    size_t len;
    char name[];
};

struct rm_sub {
    const struct rm_server_addr *addr; /* the node's */
    struct rm_reach reach;   /* told whether each dial reached the server */
    int sharded;             /* a cluster node: SSUBSCRIBE, one channel each */
    struct rm_topo_hook hook;
    int tell;                /* hook to be told (moved[] if moved_len) */
    char moved[128];
    size_t moved_len;
    char **pending;          /* sharded: channels whose SSUBSCRIBE is unanswered, */
    unsigned npending, pending_cap; /* oldest first */
    pthread_mutex_t mu;
    int efd;
    pthread_t thread;
    int started, stop;
    struct rm_conn *conn;    /* the thread's; NULL while disconnected */
    int ever_connected;
    unsigned failures;
    uint32_t rng;
    rm_nsec reconnect_at, ping_at, ping_sent;
    int ping_out;
    int dirty;               /* a channel needs (un)subscribing */
    rm_nsec next_idle;       /* earliest idle channel expiry */
    unsigned nchannels;
    struct rm_channel *bucket[NBUCKETS];
};

static size_t hash(const char *s, size_t n)
{
    size_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h & (NBUCKETS - 1);
}

static struct rm_channel **find(struct rm_sub *s, const char *name, size_t len)
{
    struct rm_channel **p = &s->bucket[hash(name, len)];
    while (*p && ((*p)->len != len || memcmp((*p)->name, name, len))) p = &(*p)->hnext;
    return p;
}

static void poke(struct rm_sub *s)
{
    uint64_t one = 1;
    ssize_t w = write(s->efd, &one, sizeof one);
    (void)w;
}

int rm_sub_create(const struct rm_server_addr *addr, struct rm_reach reach, int sharded,
                  struct rm_topo_hook hook, struct rm_sub **out)
{
    struct rm_sub *s = calloc(1, sizeof *s);
    if (!s) return ENOMEM;
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0) {
        free(s);
        return ENOMEM;
    }
    s->addr = addr;
    s->reach = reach;
    s->sharded = sharded;
    s->hook = hook;
    s->rng = (uint32_t)(uintptr_t)s ^ (uint32_t)getpid();
    s->next_idle = RM_FOREVER;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return 0;
}

static void free_channels(struct rm_sub *s)
{
    for (size_t i = 0; i < NBUCKETS; i++) {
        while (s->bucket[i]) {
            struct rm_channel *ch = s->bucket[i];
            s->bucket[i] = ch->hnext;
            free(ch);
        }
    }
    s->nchannels = 0;
    atomic_store(&rm_counters.channels, 0);
}

static void pending_clear(struct rm_sub *s)
{
    for (unsigned i = 0; i < s->npending; i++) free(s->pending[i]);
    s->npending = 0;
}

/* The oldest unanswered SSUBSCRIBE's channel, taken off the list (NULL if
 * none); the caller frees it. */
static char *pending_pop(struct rm_sub *s)
{
    if (!s->npending) return NULL;
    char *name = s->pending[0];
    memmove(s->pending, s->pending + 1, --s->npending * sizeof *s->pending);
    return name;
}

static void pending_push(struct rm_sub *s, const char *name)
{
    if (s->npending == s->pending_cap) {
        unsigned cap = s->pending_cap ? s->pending_cap * 2 : 16;
        char **p = realloc(s->pending, cap * sizeof *p);
        if (!p) return; /* its answer will match nothing: it is only a hint */
        s->pending = p;
        s->pending_cap = cap;
    }
    char *copy = strdup(name);
    if (copy) s->pending[s->npending++] = copy;
}

static void wake(struct rm_waiter *w, int why);

/* The channel is no longer served here: its waiters re-check and join it
 * where it is served now; the endpoint hears of it (moved: the MOVED
 * text, if that is how we know). */
static void moved_away(struct rm_sub *s, struct rm_channel *ch, const char *moved, size_t len)
{
    ch->state = CH_MOVED;
    for (struct rm_waiter *w = ch->head; w; w = w->next) wake(w, RM_WAKE_MOVED);
    s->tell = 1;
    if (moved && len < sizeof s->moved) {
        memcpy(s->moved, moved, len);
        s->moved_len = len;
    }
}

static void drop_conn(struct rm_sub *s, const char *why)
{
    rm_log("pub/sub connection dropped: %s", why);
    rm_conn_close(s->conn);
    s->conn = NULL;
    RM_COUNT_SUB(pubsub_connections, 1);
    s->reconnect_at = rm_clock_now() + rm_clock_backoff(s->failures, RM_MSEC(20), RM_MSEC(1000), &s->rng);
    pending_clear(s);
    /* In a cluster the node may be gone for good (a failover): waiters
     * look for the channel's current node rather than wait for this one. */
    for (size_t i = 0; i < NBUCKETS; i++)
        for (struct rm_channel *ch = s->bucket[i]; ch; ch = ch->hnext) {
            if (s->sharded && ch->head && !s->stop) moved_away(s, ch, NULL, 0);
            ch->state = CH_NEW;
        }
    s->dirty = 1;
}

void rm_sub_destroy(struct rm_sub *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    int started = s->started;
    s->stop = 1;
    pthread_mutex_unlock(&s->mu);
    if (started) {
        poke(s);
        pthread_join(s->thread, NULL);
    }
    if (s->conn) drop_conn(s, "shutdown");
    pending_clear(s);
    free(s->pending);
    free_channels(s);
    close(s->efd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void wake(struct rm_waiter *w, int why)
{
    if (w->notify) {
        w->notify(w->notify_arg, why);
        return;
    }
    /* Kept apart: behind an unused message it would be lost (DESIGN). */
    if (why == RM_WAKE_MOVED) w->moved = 1;
    if (w->woken == RM_WAKE_MESSAGE) {
        if (why == RM_WAKE_MOVED) rm_log("%s moved: told after its unused message", w->ch->name);
        return;
    }
    w->woken = why;
    pthread_cond_signal(&w->cv);
}

static void keep_message(struct rm_waiter *w, const char *msg, size_t len)
{
    size_t n = len < sizeof w->msg - 1 ? len : sizeof w->msg - 1;
    memcpy(w->msg, msg, n);
    w->msg[n] = 0;
}

/* msg to the waiters of ch it is for; how many it woke that were not
 * already woken by a message. */
static int deliver(struct rm_channel *ch, const char *msg, size_t len)
{
    int zero = len == 1 && msg[0] == '0', one = len == 1 && msg[0] == '1', n = 0;
    if (len >= 1 && msg[0] == '*') { /* a condition's broadcast: everyone here */
        for (struct rm_waiter *w = ch->head; w; w = w->next)
            if (w->woken != RM_WAKE_MESSAGE) {
                keep_message(w, msg, len);
                wake(w, RM_WAKE_MESSAGE);
                n++;
            }
        return n;
    }
    if (one) { /* Redisson's read-write lock left by a writer: every waiter of it */
        for (struct rm_waiter *w = ch->head; w; w = w->next)
            if (w->releases && w->woken != RM_WAKE_MESSAGE) wake(w, RM_WAKE_MESSAGE), n++;
        return n;
    }
    for (struct rm_waiter *w = ch->head; w; w = w->next) {
        if (w->match && len >= w->match_len && !memcmp(w->match, msg, w->match_len) &&
            (len == w->match_len || msg[w->match_len] == ' ')) {
            n = w->woken != RM_WAKE_MESSAGE;
            keep_message(w, msg, len);
            wake(w, RM_WAKE_MESSAGE);
            return n;
        }
        if (zero && (!w->match || w->releases) && w->woken != RM_WAKE_MESSAGE) {
            wake(w, RM_WAKE_MESSAGE);
            return 1;
        }
    }
    return 0;
}

static int is_str(const redisReply *r, const char *s)
{
    return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
           r->len == strlen(s) && !strcasecmp(r->str, s);
}

/* An error reply on the pub/sub connection answers the oldest SUBSCRIBE
 * still unanswered (PING and UNSUBSCRIBE are not refused).  NOPERM: the
 * user may not listen there (its ACL lacks the channel pattern).  Its
 * waiters could only poll for the rest of their wait, silently slower and
 * never told; they are woken with RM_WAKE_REFUSED instead and fail loud
 * (EACCES, rm_sub_refused).  Redis refuses a SUBSCRIBE as a whole, so every
 * channel sent and not yet confirmed is refused; one confirmed later after
 * all becomes subscribed as usual.  A reconnection asks again. */
static void refused(struct rm_sub *s, const redisReply *r)
{
    rm_log("pub/sub error: %.*s", (int)r->len, r->str);
    if (r->len < 6 || strncmp(r->str, "NOPERM", 6)) return;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (struct rm_channel *ch = s->bucket[i]; ch; ch = ch->hnext) {
            if (ch->state != CH_SENT) continue;
            ch->state = CH_REFUSED;
            for (struct rm_waiter *w = ch->head; w; w = w->next) wake(w, RM_WAKE_REFUSED);
        }
}

/* Sharded: an error answers the oldest unanswered SSUBSCRIBE, one channel
 * each.  NOPERM refuses it; anything else (MOVED: the slot is served
 * elsewhere; CLUSTERDOWN, TRYAGAIN...) sends its waiters to look again. */
static void sharded_error(struct rm_sub *s, const redisReply *r)
{
    char *name = pending_pop(s);
    rm_log("pub/sub error for %s: %.*s", name ? name : "?", (int)r->len, r->str);
    struct rm_channel *ch = name ? *find(s, name, strlen(name)) : NULL;
    free(name);
    if (!ch || ch->state != CH_SENT) return;
    if (r->len >= 6 && !strncmp(r->str, "NOPERM", 6)) {
        ch->state = CH_REFUSED;
        for (struct rm_waiter *w = ch->head; w; w = w->next) wake(w, RM_WAKE_REFUSED);
        return;
    }
    moved_away(s, ch, r->len > 6 && !strncmp(r->str, "MOVED ", 6) ? r->str : NULL, r->len);
}

static void dispatch(struct rm_sub *s, redisReply *r)
{
    if (r->type == REDIS_REPLY_STATUS && is_str(r, "PONG")) {
        s->ping_out = 0;
        return;
    }
    if (r->type == REDIS_REPLY_ERROR && r->len >= 5 && !strncmp(r->str, "NOSUB", 5) &&
        (r->len == 5 || r->str[5] == ' ')) {
        /* Valkey 8.0.0-8.0.1: an (S)UNSUBSCRIBE on a connection no longer
         * subscribed to anything.  It answers no SUBSCRIBE: taken for one,
         * it would refuse or move a channel still waiting for its answer. */
        rm_log("pub/sub: %.*s", (int)r->len, r->str);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        if (r->type == REDIS_REPLY_ERROR) {
            if (s->sharded) sharded_error(s, r);
            else refused(s, r);
        }
        return;
    }
    redisReply *kind = r->element[0], *name = r->element[1];
    if (is_str(kind, "pong")) {
        s->ping_out = 0;
        return;
    }
    if (name->type != REDIS_REPLY_STRING) return;
    if (s->sharded && is_str(kind, "ssubscribe")) free(pending_pop(s));
    struct rm_channel *ch = *find(s, name->str, name->len);
    if (!ch) return;
    const char *msg = s->sharded ? "smessage" : "message";
    const char *sub = s->sharded ? "ssubscribe" : "subscribe";
    if (is_str(kind, msg) && r->elements == 3 && r->element[2]->type == REDIS_REPLY_STRING) {
        deliver(ch, r->element[2]->str, r->element[2]->len);
    } else if (is_str(kind, sub) && (ch->state == CH_SENT || ch->state == CH_REFUSED)) {
        ch->state = CH_SUBSCRIBED;
        RM_COUNT(subscribes);
        for (struct rm_waiter *w = ch->head; w; w = w->next) wake(w, RM_WAKE_SUBSCRIBED);
    } else if (s->sharded && is_str(kind, "sunsubscribe") && ch->state == CH_SUBSCRIBED) {
        /* Our own SUNSUBSCRIBE is only ever sent for a channel already out
         * of the table, or (re-created since) still waiting for its
         * ssubscribe, which the server answers after it: a subscribed
         * channel's sunsubscribe is the server's -- its slot moved or its
         * node was demoted. */
        rm_log("the server took %s away", ch->name);
        moved_away(s, ch, NULL, 0);
    }
}

/* Queue SUBSCRIBE for new channels and UNSUBSCRIBE for expired idle ones. */
static void sync_channels(struct rm_sub *s, rm_nsec now)
{
    const char **sub = NULL, **unsub = NULL;
    size_t *sublen = NULL, *unsublen = NULL;
    int nsub = 1, nunsub = 1;
    struct rm_channel *dead = NULL;
    rm_nsec idle = RM_MSEC(RM_SETTING(idle_ms));

    size_t cap = s->nchannels + 1;
    sub = malloc(cap * sizeof *sub);
    unsub = malloc(cap * sizeof *unsub);
    sublen = malloc(cap * sizeof *sublen);
    unsublen = malloc(cap * sizeof *unsublen);
    if (!sub || !unsub || !sublen || !unsublen) goto out; /* try again on the next turn */

    s->dirty = 0;
    s->next_idle = RM_FOREVER;
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct rm_channel **p = &s->bucket[i];
        while (*p) {
            struct rm_channel *ch = *p;
            if (ch->refs == 0 && now - ch->idle_since >= idle) {
                *p = ch->hnext;
                s->nchannels--;
                if (ch->state != CH_NEW && ch->state != CH_MOVED && ch->state != CH_REFUSED) {
                    unsub[nunsub] = ch->name;
                    unsublen[nunsub++] = ch->len;
                }
                ch->hnext = dead;
                dead = ch;
                continue;
            }
            if (ch->refs == 0 && ch->idle_since + idle < s->next_idle)
                s->next_idle = ch->idle_since + idle;
            if (ch->state == CH_NEW) {
                ch->state = CH_SENT;
                sub[nsub] = ch->name;
                sublen[nsub++] = ch->len;
            }
            p = &ch->hnext;
        }
    }
    if (nsub > 1 && s->sharded) {
        /* One channel per command: a cluster refuses channels of two slots
         * in one SSUBSCRIBE, and an error then names one channel. */
        for (int i = 1; i < nsub; i++) {
            const char *v[] = { "SSUBSCRIBE", sub[i] };
            size_t l[] = { 10, sublen[i] };
            rm_conn_append(s->conn, 2, v, l);
            pending_push(s, sub[i]);
        }
    } else if (nsub > 1) {
        sub[0] = "SUBSCRIBE";
        sublen[0] = 9;
        rm_conn_append(s->conn, nsub, sub, sublen);
    }
    if (nsub > 1) rm_log("subscribing %d channel(s)", nsub - 1);
    if (nunsub > 1 && s->sharded) {
        for (int i = 1; i < nunsub; i++) {
            const char *v[] = { "SUNSUBSCRIBE", unsub[i] };
            size_t l[] = { 12, unsublen[i] };
            rm_conn_append(s->conn, 2, v, l);
        }
    } else if (nunsub > 1) {
        unsub[0] = "UNSUBSCRIBE";
        unsublen[0] = 11;
        rm_conn_append(s->conn, nunsub, unsub, unsublen);
    }
    if (nunsub > 1) {
        RM_COUNT_ADD(unsubscribes, (uint64_t)(nunsub - 1));
        rm_log("unsubscribing %d idle channel(s)", nunsub - 1);
    }
    atomic_store(&rm_counters.channels, s->nchannels);
out:
    while (dead) {
        struct rm_channel *ch = dead;
        dead = ch->hnext;
        free(ch);
    }
    free(sub);
    free(unsub);
    free(sublen);
    free(unsublen);
}

static void connect_locked(struct rm_sub *s)
{
    pthread_mutex_unlock(&s->mu);
    struct rm_conn *c = NULL;
    int r = rm_conn_dial(s->addr, "sub", RM_FOREVER, &c);
    if (!r || r == RM_E_UNSENT) s->reach.fn(s->reach.arg, !r);
    pthread_mutex_lock(&s->mu);
    rm_nsec now = rm_clock_now();
    if (r) {
        s->reconnect_at = now + rm_clock_backoff(s->failures++, RM_MSEC(20), RM_MSEC(1000), &s->rng);
        rm_log("pub/sub connect failed: %s", rmutex_detail());
        return;
    }
    if (s->stop) {
        rm_conn_close(c);
        return;
    }
    if (s->ever_connected) RM_COUNT(reconnects);
    s->ever_connected = 1;
    s->failures = 0;
    s->conn = c;
    s->ping_at = now + PING_EVERY;
    s->ping_out = 0;
    s->dirty = 1;
    RM_COUNT(pubsub_connections);
}

/* Tell the endpoint what we learnt, without our lock: it takes its own,
 * and the fork handlers take the endpoint's before ours. */
static void tell_hook(struct rm_sub *s)
{
    char moved[sizeof s->moved];
    size_t len = s->moved_len;
    memcpy(moved, s->moved, len);
    s->tell = 0;
    s->moved_len = 0;
    pthread_mutex_unlock(&s->mu);
    if (s->hook.fn) s->hook.fn(s->hook.arg, len ? moved : NULL, len);
    pthread_mutex_lock(&s->mu);
}

static void *sub_main(void *arg)
{
    struct rm_sub *s = arg;
    pthread_setname_np(pthread_self(), "rmutex-sub");
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        rm_nsec now = rm_clock_now(), wake_at;
        if (!s->conn && now >= s->reconnect_at) {
            connect_locked(s);
            continue;
        }
        if (s->conn) {
            if (s->dirty || now >= s->next_idle) sync_channels(s, now);
            if (s->ping_out && now - s->ping_sent > PING_TIMEOUT) {
                drop_conn(s, "no answer to PING");
                continue;
            }
            if (!s->ping_out && now >= s->ping_at) {
                static const char *ping[] = { "PING" };
                static const size_t pinglen[] = { 4 };
                rm_conn_append(s->conn, 1, ping, pinglen);
                s->ping_out = 1;
                s->ping_sent = now;
                s->ping_at = now + PING_EVERY;
            }
            if (s->conn->wlen) {
                struct rm_conn *c = s->conn;
                pthread_mutex_unlock(&s->mu);
                int r = rm_conn_flush(c, RM_FOREVER);
                pthread_mutex_lock(&s->mu);
                if (r) {
                    s->failures++;
                    drop_conn(s, "write failed");
                    continue;
                }
            }
            wake_at = rm_clock_min(s->next_idle, s->ping_out ? s->ping_sent + PING_TIMEOUT : s->ping_at);
        } else {
            wake_at = s->reconnect_at;
        }

        struct pollfd p[2] = { { s->efd, POLLIN, 0 }, { s->conn ? s->conn->fd : -1, POLLIN, 0 } };
        struct rm_conn *c = s->conn;
        pthread_mutex_unlock(&s->mu);
        rm_nsec left = wake_at == RM_FOREVER ? -1 : wake_at - rm_clock_now();
        int ms = left < 0 ? (wake_at == RM_FOREVER ? -1 : 0) : (int)((left + 999999) / 1000000);
        int n = poll(p, c ? 2 : 1, ms);
        if (n > 0 && (p[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t rd = read(s->efd, &v, sizeof v);
            (void)rd;
        }
        int r = 0;
        if (n > 0 && c && p[1].revents) r = rm_conn_read_available(c);
        pthread_mutex_lock(&s->mu);
        if (!c) continue;
        redisReply *reply;
        int got;
        while ((got = rm_conn_next_reply(c, &reply)) > 0) {
            dispatch(s, reply);
            freeReplyObject(reply);
        }
        if (r || got < 0) {
            s->failures++;
            drop_conn(s, "read failed");
        }
        if (s->tell) tell_hook(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int start_locked(struct rm_sub *s)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&s->thread, NULL, sub_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r) return r;
    s->started = 1;
    return 0;
}

int rm_sub_join(struct rm_sub *s, const char *channel, struct rm_waiter *w, const char *match,
                size_t match_len)
{
    return rm_sub_join_notify(s, channel, w, match, match_len, NULL, NULL);
}

static int join(struct rm_sub *s, const char *channel, struct rm_waiter *w, const char *match,
                size_t match_len, void (*notify)(void *arg, int why), void *arg, int releases)
{
    size_t len = strlen(channel);
    memset(w, 0, sizeof *w);
    w->sub = s;
    w->match = match;
    w->match_len = match_len;
    w->releases = releases;
    w->notify = notify;
    w->notify_arg = arg;
    if (rm_clock_cond_init(&w->cv)) return ENOMEM;

    pthread_mutex_lock(&s->mu);
    if (!s->started && start_locked(s)) {
        pthread_mutex_unlock(&s->mu);
        pthread_cond_destroy(&w->cv);
        rm_detail("cannot start the pub/sub thread");
        return EAGAIN;
    }
    struct rm_channel **p = find(s, channel, len), *ch = *p;
    if (!ch) {
        ch = calloc(1, sizeof *ch + len + 1);
        if (!ch) {
            pthread_mutex_unlock(&s->mu);
            pthread_cond_destroy(&w->cv);
            return ENOMEM;
        }
        memcpy(ch->name, channel, len);
        ch->len = len;
        ch->state = CH_NEW;
        *p = ch;
        s->nchannels++;
        s->dirty = 1;
        poke(s);
    }
    if (ch->state == CH_MOVED) { /* routed here again: ask this node again */
        ch->state = CH_NEW;
        s->dirty = 1;
        poke(s);
    }
    ch->refs++;
    w->seq = ++ch->joins;
    w->ch = ch;
    if (ch->state == CH_REFUSED) {
        if (notify) notify(arg, RM_WAKE_REFUSED);
        else w->woken = RM_WAKE_REFUSED;
    }
    w->prev = ch->tail;
    if (ch->tail) ch->tail->next = w;
    else ch->head = w;
    ch->tail = w;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int rm_sub_join_notify(struct rm_sub *s, const char *channel, struct rm_waiter *w,
                       const char *match, size_t match_len, void (*notify)(void *arg, int why),
                       void *arg)
{
    return join(s, channel, w, match, match_len, notify, arg, 0);
}

int rm_sub_join_releases(struct rm_sub *s, const char *channel, struct rm_waiter *w,
                         const char *match, size_t match_len)
{
    return join(s, channel, w, match, match_len, NULL, NULL, 1);
}

const char *rm_sub_channel(const struct rm_waiter *w) { return w->ch->name; }

unsigned long rm_sub_rank(struct rm_waiter *w)
{
    struct rm_sub *s = w->sub;
    pthread_mutex_lock(&s->mu);
    struct rm_waiter *o = w->ch->head; /* joined at the tail: the oldest first */
    while (o && o->notify) o = o->next;
    unsigned long n = o ? w->seq - o->seq : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void rm_sub_poke(struct rm_waiter *w)
{
    struct rm_sub *s = w->sub;
    pthread_mutex_lock(&s->mu);
    wake(w, RM_WAKE_LOOK);
    pthread_mutex_unlock(&s->mu);
}

int rm_sub_deliver(struct rm_sub *s, const char *channel, const char *msg, size_t len)
{
    pthread_mutex_lock(&s->mu);
    struct rm_channel *ch = *find(s, channel, strlen(channel));
    int woke = ch ? deliver(ch, msg, len) : 0;
    pthread_mutex_unlock(&s->mu);
    return woke;
}

void rm_sub_move_all(struct rm_sub *s)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < NBUCKETS; i++)
        for (struct rm_channel *ch = s->bucket[i]; ch; ch = ch->hnext)
            for (struct rm_waiter *w = ch->head; w; w = w->next) wake(w, RM_WAKE_MOVED);
    pthread_mutex_unlock(&s->mu);
}

int rm_sub_refused(const struct rm_waiter *w)
{
    rm_detail("Redis refused to SUBSCRIBE to %s (NOPERM: the user's ACL needs its channel "
              "pattern, docs/acl.md)", w->ch->name);
    return EACCES;
}

static void unlock_mu(void *mu) { pthread_mutex_unlock(mu); }

int rm_sub_wait_cancellable(struct rm_waiter *w, rm_nsec deadline, int cancel_state)
{
    struct rm_sub *s = w->sub;
    int why, ignored;
    pthread_mutex_lock(&s->mu);
    /* Cancelled in the sleep, the thread has s->mu again: give it back. */
    pthread_cleanup_push(unlock_mu, &s->mu);
    while (!w->woken && !w->moved) {
        pthread_setcancelstate(cancel_state, &ignored);
        int r = rm_clock_cond_wait_until(&w->cv, &s->mu, deadline);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
        if (r == ETIMEDOUT) break;
    }
    why = w->woken ? w->woken : w->moved ? RM_WAKE_MOVED : RM_WAKE_TIMEOUT;
    w->woken = 0;
    if (why == RM_WAKE_MOVED) w->moved = 0;
    pthread_cleanup_pop(1);
    if (why == RM_WAKE_MESSAGE) RM_COUNT(wakeups_pubsub);
    else if (why == RM_WAKE_SUBSCRIBED || why == RM_WAKE_MOVED) RM_COUNT(wakeups_subscribe);
    else if (why == RM_WAKE_TIMEOUT) RM_COUNT(wakeups_poll);
    return why;
}

int rm_sub_wait(struct rm_waiter *w, rm_nsec deadline)
{
    return rm_sub_wait_cancellable(w, deadline, PTHREAD_CANCEL_DISABLE);
}

void rm_sub_leave(struct rm_waiter *w)
{
    struct rm_sub *s = w->sub;
    pthread_mutex_lock(&s->mu);
    struct rm_channel *ch = w->ch;
    if (w->prev) w->prev->next = w->next;
    else ch->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else ch->tail = w->prev;
    /* A release message this waiter did not use goes to the next one. */
    if (w->woken == RM_WAKE_MESSAGE && !w->match)
        for (struct rm_waiter *o = ch->head; o; o = o->next)
            if (!o->match && o->woken != RM_WAKE_MESSAGE) {
                wake(o, RM_WAKE_MESSAGE);
                break;
            }
    if (--ch->refs == 0) {
        ch->idle_since = rm_clock_now();
        if (ch->idle_since + RM_MSEC(RM_SETTING(idle_ms)) < s->next_idle) {
            s->next_idle = ch->idle_since + RM_MSEC(RM_SETTING(idle_ms));
            poke(s);
        }
    }
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&w->cv);
}

void rm_sub_atfork(struct rm_sub *s, int who)
{
    if (who < 0) {
        pthread_mutex_lock(&s->mu);
        return;
    }
    if (who == 0) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    /* Child: no thread, the parent's socket and eventfd are not ours (and
     * the connection's parser may be half-way through a reply). */
    rm_conn_abandon(s->conn);
    s->conn = NULL;
    pending_clear(s);
    s->tell = 0;
    s->moved_len = 0;
    free_channels(s);
    close(s->efd);
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->started = s->stop = 0;
    s->ever_connected = 0;
    s->failures = 0;
    s->reconnect_at = 0;
    s->dirty = 0;
    s->next_idle = RM_FOREVER;
    s->rng ^= (uint32_t)getpid();
    pthread_mutex_unlock(&s->mu); /* taken by the prepare handler, in this thread */
}
