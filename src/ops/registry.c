/* registry.c -- the holder registry: who a lock's holder is.
 *
 * DESIGN
 * ------
 * A lock in Redis names its holder by owner id only ("<uuid>:<thread>",
 * Redisson's form).  An operator asking `rmutex status shop:orders` wants
 * more: which machine, which process, which program, since when.  So a
 * process that holds locks keeps one hash about itself,
 * rmutex_client:{<process-uuid>}: host, pid, exe, cmd, lib, start, and
 * per hold "held:<lock key>" = the server time of its acquisition.
 *
 * Nothing of it is on the lock's path: the watchdog writes it, as a
 * periodic call of this file's (announce.lua, one call; the entry is
 * rewritten whole, so holds let go of drop out), at the process's first
 * hold, again about a second after any new hold if that is still held,
 * and every default-lease/3 while the process holds anything: the
 * watchdog tells rm_registry_hold_added of every new hold, with its lock
 * held, and the call is built from the holds the watchdog has then.  It lives two default leases, so it lapses soon
 * after the process stops holding or dies, and it never outlives its
 * holds by much.  How long a hold has lasted is sent, not when it began:
 * the script turns it into server time, and the reader compares it with
 * server time -- no client clock is ever compared with another.  A hold
 * younger than the last announcement shows as "unknown" for about a
 * second; a hold released and taken again by the same thread within that
 * second shows the earlier acquisition's age until the next one.
 *
 * The reader is rmutex_inspect (whois.lua on the node that serves the
 * registry key: in a cluster, not the lock's), for a lock's holder and for
 * each reader of a read-write lock it describes (a process's reads are one
 * watchdog entry, announced as "held:<lock>" like a hold).  RMUTEX_ANNOUNCE=0 in the
 * environment turns announcing off; holds then show by owner id only.
 *
 * Waits.  A thread that waits (wait.c's acquisition loop, a condition
 * wait) lists a record on its own stack here: the lock's name, the kind of
 * wait, its owner id, when it began -- a list under a mutex of this file's,
 * no Redis call.  The entry lists, as "wait:<owner>" = "<server ms it
 * began>|<kind>|<d or ->|<name>", the waits that have lasted announce_wait
 * (100 ms): the waiting thread pokes the watchdog to be due when its wait
 * reaches that age, and the build, finding it gone by then, sends nothing
 * -- a wait shorter than the delay costs no call.  The entry is rewritten
 * when something is new (a hold, a wait old enough, an announced wait that
 * ended: poked RM_REGISTRY_WAIT_GONE_MS after it ends) and renewed every
 * period while the process holds or waits; else the build answers "not
 * yet" (the watchdog's call->again) or, with nothing held and nothing
 * waited for, dormant.  A wait's start is kept by announce.lua once
 * written, so every reader (deadlock.c) sees the same moment.  Read by
 * rmutex_waits (waits.c) and deadlock.c (whois.lua with a thread). */
#include "registry.h"
#include "names.h"
#include "script.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static int enabled = 1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *v = getenv("RMUTEX_ANNOUNCE");
    enabled = !(v && (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off")));
}

int rm_registry_enabled(void)
{
    pthread_once(&once, read_env);
    return enabled;
}

size_t rm_registry_key(const char *owner, char *buf, size_t size)
{
    const char *end = owner ? strchr(owner, '|') : NULL;
    size_t len = owner ? (end ? (size_t)(end - owner) : strlen(owner)) : 0;
    static const char write[] = ":write"; /* a read-write lock's writer's field */
    if (len > sizeof write - 1 && !memcmp(owner + len - (sizeof write - 1), write, sizeof write - 1))
        len -= sizeof write - 1;
    while (len && owner[len - 1] != ':') len--; /* drop ":<thread>" */
    if (len < 2) return 0;
    int n = snprintf(buf, size, "rmutex_client:{%.*s}", (int)(len - 1), owner);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* /proc/self/cmdline with its NULs as spaces, cut to fit. */
static size_t command_line(char *buf, size_t size)
{
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f) return 0;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    while (n && buf[n - 1] == 0) n--;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == 0) buf[i] = ' ';
    buf[n] = 0;
    return n;
}

/* Append the pair field, value (len bytes) as the n-th. */
static void pair(const char **argv, size_t *lens, int *n, const char *field, const char *value,
                 size_t len)
{
    argv[2 * *n] = field;
    lens[2 * *n] = strlen(field);
    argv[2 * *n + 1] = value;
    lens[2 * *n + 1] = len;
    ++*n;
}

int rm_registry_describe(struct rm_registry_text *t, const char **argv, size_t *lens)
{
    int n = 0;
    struct utsname u;
    snprintf(t->host, sizeof t->host, "%s", uname(&u) ? "" : u.nodename);
    pair(argv, lens, &n, "host", t->host, strlen(t->host));
    pair(argv, lens, &n, "pid", t->pid, (size_t)snprintf(t->pid, sizeof t->pid, "%ld", (long)getpid()));
    ssize_t e = readlink("/proc/self/exe", t->exe, sizeof t->exe - 1);
    pair(argv, lens, &n, "exe", t->exe, e > 0 ? (size_t)e : 0);
    pair(argv, lens, &n, "cmd", t->cmd, command_line(t->cmd, sizeof t->cmd));
    pair(argv, lens, &n, "lib", RM_VERSION_STRING, strlen(RM_VERSION_STRING));
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pair(argv, lens, &n, "start", t->start, (size_t)snprintf(t->start, sizeof t->start, "%lld",
         (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000));
    return n;
}

/* ---- announcing: a periodic call of the watchdog ---- */

/* How often a process that holds locks announces itself (an announcement
 * lives six times that). */
static rm_nsec announce_period(void) { return RM_MSEC(RM_SETTING(lease_ms)) / 3; }

unsigned long rm_registry_period_ms(void) { return RM_SETTING(lease_ms) / 3; }

/* This process's description, made once per process (a forked child makes
 * its own: another pid, another start), under the watchdog's lock. */
static struct {
    pid_t pid;
    int pairs;
    struct rm_registry_text text;
    const char *argv[2 * RM_REGISTRY_PAIRS];
    size_t lens[2 * RM_REGISTRY_PAIRS];
} me;

static void describe_once(void)
{
    if (me.pid == getpid()) return;
    me.pairs = rm_registry_describe(&me.text, me.argv, me.lens);
    me.pid = getpid();
}

/* The waits of this process's threads (their records are on their
 * stacks), and what the announcements know of them.  mu is taken under
 * the watchdog's lock (build, done), never the other way round. */
static struct {
    pthread_mutex_t mu;
    struct rm_registry_wait *head;
    int gone;         /* an announced wait ended since the last call was built */
    int stale;        /* one ended without what it waited for (not at its deadline):
                         out with the next regular write */
    int fresh;        /* a new hold since then (the watchdog's lock) */
    rm_nsec regular;  /* the next renewal of the entry is due (the watchdog's lock) */
    uint64_t counted; /* the counters' sum when the last call was built (the watchdog's lock) */
    int follow;       /* a call was sent and the entry has not gone dormant since: moved
                         counters are published at the next period (the watchdog's lock) */
    int said_waits;   /* the call on the wire lists waits or takes one out */
    int failures;     /* such calls unanswered in a row */
} waits = { .mu = PTHREAD_MUTEX_INITIALIZER };

static rm_nsec announce_delay(void) { return RM_MSEC(RM_SETTING(announce_wait_ms)); }

/* The call being built: its arguments and where the next text goes. */
struct building {
    const char **argv;
    size_t *lens;
    size_t k, max;
    char *p;
    rm_nsec now;
};

enum { NUM = 24 }; /* room for a number */

static void add_text(struct building *b, const char *text, size_t len)
{
    memcpy(b->p, text, len); /* a copy: the hold or wait may end while the call is on the wire */
    b->argv[b->k] = b->p, b->lens[b->k++] = len;
    b->p += len;
}

static void add_number(struct building *b, long long v)
{
    b->argv[b->k] = b->p;
    b->lens[b->k++] = (size_t)snprintf(b->p, NUM, "%lld", v);
    b->p += NUM;
}

static void add_hold(void *arg, const char *lock, size_t len, rm_nsec acquired)
{
    struct building *b = arg;
    if (b->k + 2 > b->max) return;
    add_text(b, lock, len);
    add_number(b, (b->now > acquired ? b->now - acquired : 0) / RM_MSEC(1));
}

static void add_length(void *arg, const char *lock, size_t len, rm_nsec acquired)
{
    RM_UNUSED(lock);
    RM_UNUSED(acquired);
    *(size_t *)arg += len;
}

/* A wait old enough to be announced, on ep, now. */
static int wait_shown(const struct rm_registry_wait *w, const struct rm_endpoint *ep, rm_nsec now)
{
    return w->ep == ep && w->since + announce_delay() <= now;
}

/* The waits to announce (waits.mu held): how many, their text's length,
 * whether one of them is new, and when the next one becomes old enough. */
struct wait_count {
    size_t n, text;
    int fresh;
    rm_nsec next;
};

static void count_waits_locked(const struct rm_endpoint *ep, rm_nsec now, struct wait_count *c)
{
    *c = (struct wait_count){ .next = RM_FOREVER };
    for (const struct rm_registry_wait *w = waits.head; w && c->n < RM_REGISTRY_HOLDS; w = w->next) {
        if (w->ep != ep) continue;
        if (!wait_shown(w, ep, now)) {
            c->next = rm_clock_min(c->next, w->since + announce_delay());
            continue;
        }
        c->n++;
        c->text += strlen(w->owner) + strlen(w->lock) + 8 + NUM;
        if (!w->announced) c->fresh = 1;
    }
}

/* Each wait's quadruple: owner, ms it has lasted, ms left to its
 * deadline (-1: none), "<kind>|<d or ->|<lock>". */
static void add_waits_locked(struct building *b, const struct rm_endpoint *ep, size_t n)
{
    for (struct rm_registry_wait *w = waits.head; w && n; w = w->next) {
        if (!wait_shown(w, ep, b->now) || b->k + 4 > b->max) continue;
        add_text(b, w->owner, strlen(w->owner));
        add_number(b, (b->now - w->since) / RM_MSEC(1));
        add_number(b, !w->deadline || w->deadline == RM_FOREVER ? -1
                      : w->deadline > b->now ? (w->deadline - b->now) / RM_MSEC(1) : 0);
        b->argv[b->k] = b->p;
        b->lens[b->k++] = (size_t)sprintf(b->p, "%c|%c|%s", w->kind, w->detect ? 'd' : '-', w->lock);
        b->p += b->lens[b->k - 1] + 1;
        if (!w->announced) RM_COUNT(waits_announced);
        w->announced = 1;
        n--;
    }
}

/* ---- the counters published per name (names.c) ---- */

/* The "stat:<name>" pairs being made: field, NUL, value, NUL, one after
 * the other in text. */
struct published {
    char *text;
    size_t len, cap, n;
    int failed;
};

static void put(struct published *p, const char *s, size_t len)
{
    if (p->failed) return;
    if (p->len + len > p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 4096;
        while (cap < p->len + len) cap *= 2;
        char *t = realloc(p->text, cap);
        if (!t) {
            p->failed = 1;
            return;
        }
        p->text = t;
        p->cap = cap;
    }
    memcpy(p->text + p->len, s, len);
    p->len += len;
}

static void put_histogram(struct published *p, char tag, const rmutex_histogram_t *h)
{
    char num[48];
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++)
        if (h->bucket[i])
            put(p, num, (size_t)snprintf(num, sizeof num, " %c%d:%llu", tag, i,
                                         (unsigned long long)h->bucket[i]));
}

/* One name's pair (name NULL: the other names', field "stat:"): the value
 * is "<acquisitions> <contended> <uncontended> <lost> <renewals> <wait
 * sum us> <hold sum us>" then " w<i>:<n>" for each wait bucket that is
 * not empty, " h<i>:<n>" for each hold bucket.  A name with nothing
 * counted is left out. */
static void publish_name(const char *name, const struct rm_names_snapshot *s, void *arg)
{
    struct published *p = arg;
    if (!s->acquisitions && !s->renewals && !s->locks_lost && !s->wait_time.count &&
        !s->hold_time.count)
        return;
    char num[8 * 24];
    put(p, "stat:", 5);
    if (name) put(p, name, strlen(name));
    put(p, "", 1);
    put(p, num, (size_t)snprintf(num, sizeof num, "%llu %llu %llu %llu %llu %llu %llu",
                                 (unsigned long long)s->acquisitions,
                                 (unsigned long long)s->contended,
                                 (unsigned long long)s->uncontended,
                                 (unsigned long long)s->locks_lost,
                                 (unsigned long long)s->renewals,
                                 (unsigned long long)s->wait_time.sum_us,
                                 (unsigned long long)s->hold_time.sum_us));
    put_histogram(p, 'w', &s->wait_time);
    put_histogram(p, 'h', &s->hold_time);
    put(p, "", 1);
    p->n++;
}

/* What the published counters have moved by, in one number: a change
 * since the last call is news to publish at the next period, even with
 * nothing held any more (the last hold's time, say) -- once after a call,
 * not after the entry went dormant (then the next hold's call says it). */
static uint64_t counters_sum(void)
{
    return atomic_load_explicit(&rm_counters.acquisitions, memory_order_relaxed) +
           atomic_load_explicit(&rm_counters.locks_lost, memory_order_relaxed) +
           atomic_load_explicit(&rm_counters.renewals, memory_order_relaxed) +
           atomic_load_explicit(&rm_counters.hold_time.sum_us, memory_order_relaxed) +
           atomic_load_explicit(&rm_counters.wait_time.sum_us, memory_order_relaxed);
}

/* announce.lua's call with the holds, counters and waits of now: KEYS[1]
 * the registry key; ARGV the time it lives, the pairs about the process,
 * the number of holds, each hold's lock key and how long it has been held
 * (ms), the number of counter pairs and each ("stat:<name>", its counts:
 * the RM_REGISTRY_NAMES busiest names, then the others'), then each
 * wait's triple.  Sent when something is new (a hold, a
 * wait old enough, a wait that ended) or the last one is due for renewal;
 * else 0, again when the next wait becomes old enough or the renewal is
 * due -- or dormant, with nothing held and nothing waited for (the entry
 * in Redis lapses). */
static int announce_build(void *arg, struct rm_endpoint *ep, const char *key, size_t key_len,
                          rm_nsec now, struct rm_watchdog_call *call)
{
    RM_UNUSED(arg);
    size_t keys = 0;
    size_t holds = rm_watchdog_each_hold_locked(ep, RM_REGISTRY_HOLDS, add_length, &keys);
    struct wait_count wc;
    pthread_mutex_lock(&waits.mu);
    count_waits_locked(ep, now, &wc);
    uint64_t counted = counters_sum();
    int busy = holds || wc.n || waits.stale || (waits.follow && counted != waits.counted);
    int send = waits.gone || wc.fresh || waits.fresh || (busy && now >= waits.regular);
    if (!send) {
        if (!busy) waits.follow = 0; /* dormant: a later poke (a short wait's) sends nothing */
        call->again = busy ? rm_clock_min(waits.regular, wc.next)
                           : wc.next == RM_FOREVER ? 0 : wc.next;
        pthread_mutex_unlock(&waits.mu);
        return 0;
    }
    describe_once();
    struct published pub = { 0 };
    rm_names_busiest(RM_REGISTRY_NAMES, publish_name, &pub);
    if (pub.failed) pub.n = pub.len = 0; /* (short of memory: the counters wait) */
    size_t argc = 5 + 2 * (size_t)me.pairs + 2 * holds + 2 * pub.n + 4 * wc.n;
    size_t text = (4 + holds + wc.n) * NUM + keys + wc.text + pub.len;
    char *mem = malloc(argc * (sizeof(char *) + sizeof(size_t)) + text);
    if (!mem) {
        pthread_mutex_unlock(&waits.mu);
        free(pub.text);
        call->again = now + announce_period();
        return 0;
    }
    struct building b = { (const char **)mem, (size_t *)(mem + argc * sizeof(char *)), 0, argc,
                          mem + argc * (sizeof(char *) + sizeof(size_t)), now };
    b.argv[b.k] = key, b.lens[b.k++] = key_len;
    add_number(&b, 6 * announce_period() / RM_MSEC(1));
    add_number(&b, me.pairs);
    for (int i = 0; i < 2 * me.pairs; i++) b.argv[b.k] = me.argv[i], b.lens[b.k++] = me.lens[i];
    add_number(&b, (long long)holds);
    rm_watchdog_each_hold_locked(ep, holds, add_hold, &b);
    add_number(&b, (long long)pub.n);
    for (const char *t = pub.text; t < pub.text + pub.len;) {
        size_t len = strlen(t);
        add_text(&b, t, len);
        t += len + 1;
    }
    free(pub.text);
    add_waits_locked(&b, ep, wc.n);
    waits.said_waits = wc.n || waits.gone;
    waits.gone = waits.fresh = waits.stale = 0;
    waits.counted = counted;
    waits.follow = 1;
    pthread_mutex_unlock(&waits.mu);
    *call = (struct rm_watchdog_call){ RM_SCRIPT_ANNOUNCE, 1, (int)b.k, b.argv, b.lens, mem, 0 };
    RM_COUNT(announcements);
    return 1;
}

/* Answered or not (unreachable, or an ACL without the registry): again at
 * the next period (or sooner, for a wait that becomes old enough before
 * it, or one that ended meanwhile); nothing depends on it. */
static rm_nsec announce_done(void *arg, int answered, rm_nsec sent, rm_nsec now)
{
    RM_UNUSED(arg);
    waits.regular = (answered ? sent : now) + announce_period();
    rm_nsec next = waits.regular;
    pthread_mutex_lock(&waits.mu);
    for (const struct rm_registry_wait *w = waits.head; w; w = w->next)
        if (!w->announced) next = rm_clock_min(next, rm_clock_max(now, w->since + announce_delay()));
    if (waits.gone) next = now; /* a wait ended while the call was on the wire */
    /* Unanswered: what it said of waits is sent again at the next period
     * (an ended wait it took out must not wait for the entry to lapse) --
     * for as long as the entry would live anyway, not forever. */
    if (answered) waits.failures = 0;
    else if (waits.said_waits && ++waits.failures < 6) waits.gone = 1;
    pthread_mutex_unlock(&waits.mu);
    return next;
}

/* A new start of the watchdog (after rmutex_shutdown): what the last
 * session sent is no reason to send now. */
static void announce_start(void *arg)
{
    RM_UNUSED(arg);
    waits.follow = 0;
}

static const struct rm_watchdog_periodic announce = { announce_build, announce_done, announce_start };

void rm_registry_hold_added(struct rm_endpoint *ep, const char *owner, size_t owner_len)
{
    if (!rm_registry_enabled()) return;
    waits.fresh = 1;
    rm_nsec now = rm_clock_now();
    struct rm_watchdog_entry *a = rm_watchdog_periodic_find_locked(ep, &announce);
    if (a) {
        rm_watchdog_poke_locked(a, now + RM_MSEC(1000));
        return;
    }
    char key[128], who[128];
    if (owner_len >= sizeof who) return;
    memcpy(who, owner, owner_len);
    who[owner_len] = 0;
    size_t n = rm_registry_key(who, key, sizeof key);
    if (n) rm_watchdog_periodic_locked(ep, key, n, &announce, NULL, now);
}

/* Make the announcement of w's process due by due. */
static void poke(const struct rm_registry_wait *w, rm_nsec due)
{
    char key[128];
    size_t n = rm_registry_key(w->owner, key, sizeof key);
    if (n) rm_watchdog_periodic_poke(w->ep, key, n, &announce, due);
}

void rm_registry_wait_begin(struct rm_registry_wait *w)
{
    w->since = 0;
    w->announced = 0;
    if (!rm_registry_enabled() || !announce_delay()) return;
    w->since = rm_clock_now();
    pthread_mutex_lock(&waits.mu);
    w->prev = NULL;
    w->next = waits.head;
    if (waits.head) waits.head->prev = w;
    waits.head = w;
    pthread_mutex_unlock(&waits.mu);
    poke(w, w->since + announce_delay());
}

void rm_registry_wait_ended(struct rm_registry_wait *w, int r)
{
    if (!w->since) return;
    int timed_out = r == ETIMEDOUT && w->deadline && w->deadline != RM_FOREVER;
    pthread_mutex_lock(&waits.mu);
    if (w->prev) w->prev->next = w->next;
    else waits.head = w->next;
    if (w->next) w->next->prev = w->prev;
    int announced = w->announced;
    if (announced && (!r || r == EOWNERDEAD)) waits.gone = 1;
    else if (announced && !timed_out) waits.stale = 1;
    pthread_mutex_unlock(&waits.mu);
    w->since = 0;
    if (announced && (!r || r == EOWNERDEAD))
        poke(w, rm_clock_now() + RM_MSEC(RM_REGISTRY_WAIT_GONE_MS));
}

void rm_registry_wait_end(struct rm_registry_wait *w) { rm_registry_wait_ended(w, 0); }

void rm_registry_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&waits.mu);
        return;
    }
    if (who > 0) { /* the child: the parent's waiting threads are not here */
        waits.head = NULL;
        waits.gone = waits.fresh = waits.stale = 0;
        waits.regular = 0;
        waits.counted = 0;
        waits.follow = 0;
        waits.said_waits = waits.failures = 0;
    }
    pthread_mutex_unlock(&waits.mu);
}

int rm_registry_parse_wait(const char *text, size_t len, struct rm_registry_waitfield *out)
{
    char *end;
    char num[NUM];
    const char *bar = memchr(text, '|', len);
    if (!bar || (size_t)(bar - text) >= sizeof num || len - (size_t)(bar - text) < 5 ||
        bar[2] != '|' || bar[4] != '|')
        return -1;
    memcpy(num, text, (size_t)(bar - text));
    num[bar - text] = 0;
    out->since_ms = strtoll(num, &end, 10);
    if (end == num || *end) return -1;
    out->kind = bar[1];
    out->detect = bar[3] == 'd';
    out->lock = bar + 5;
    out->lock_len = len - (size_t)(bar + 5 - text);
    return 0;
}

static void copy(char *dst, size_t n, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING) snprintf(dst, n, "%.*s", (int)r->len, r->str);
    else dst[0] = 0;
}

void rm_registry_read(const redisReply *r, int64_t server_time_ms,
                      const struct rm_registry_fields *f)
{
    *f->held_ms = -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 6) return;
    redisReply **e = r->element;
    if (e[1]->type != REDIS_REPLY_STRING) return; /* no entry */
    *f->known = 1;
    *f->pid = strtol(e[1]->str, NULL, 10);
    copy(f->host, f->host_size, e[0]);
    copy(f->exe, f->exe_size, e[2]);
    copy(f->cmd, f->cmd_size, e[3]);
    copy(f->lib, f->lib_size, e[4]);
    if (e[5]->type == REDIS_REPLY_STRING) {
        long long since = strtoll(e[5]->str, NULL, 10);
        if (since > 0 && since <= server_time_ms) *f->held_ms = server_time_ms - since;
    }
}
