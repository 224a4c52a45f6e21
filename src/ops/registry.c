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
 * environment turns announcing off; holds then show by owner id only. */
#include "registry.h"
#include "script.h"
#include "watchdog.h"

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

/* The call being built: its arguments and where the next text goes. */
struct building {
    const char **argv;
    size_t *lens;
    size_t k, max;
    char *p;
    rm_nsec now;
};

enum { NUM = 24 }; /* room for a number */

static void add_hold(void *arg, const char *lock, size_t len, rm_nsec acquired)
{
    struct building *b = arg;
    if (b->k + 2 > b->max) return;
    memcpy(b->p, lock, len); /* a copy: the hold may end while the call is on the wire */
    b->argv[b->k] = b->p, b->lens[b->k++] = len;
    b->p += len;
    rm_nsec held = b->now > acquired ? b->now - acquired : 0;
    b->argv[b->k] = b->p;
    b->lens[b->k++] = (size_t)snprintf(b->p, NUM, "%lld", (long long)(held / RM_MSEC(1)));
    b->p += NUM;
}

static void add_length(void *arg, const char *lock, size_t len, rm_nsec acquired)
{
    RM_UNUSED(lock);
    RM_UNUSED(acquired);
    *(size_t *)arg += len;
}

/* announce.lua's call with the holds of now: KEYS[1] the registry key;
 * ARGV the time it lives, the pairs about the process, then each hold's
 * lock key and how long it has been held (ms).  0 when there are no
 * holds: the entry stays dormant, and the one in Redis lapses. */
static int announce_build(void *arg, struct rm_endpoint *ep, const char *key, size_t key_len,
                          rm_nsec now, struct rm_watchdog_call *call)
{
    RM_UNUSED(arg);
    size_t keys = 0;
    size_t holds = rm_watchdog_each_hold_locked(ep, RM_REGISTRY_HOLDS, add_length, &keys);
    if (!holds) return 0;
    describe_once();
    size_t argc = 3 + 2 * (size_t)me.pairs + 2 * holds;
    size_t text = (2 + holds) * NUM + keys;
    char *mem = malloc(argc * (sizeof(char *) + sizeof(size_t)) + text);
    if (!mem) return 0;
    struct building b = { (const char **)mem, (size_t *)(mem + argc * sizeof(char *)), 0, argc,
                          mem + argc * (sizeof(char *) + sizeof(size_t)), now };
    b.argv[b.k] = key, b.lens[b.k++] = key_len;
    b.argv[b.k] = b.p;
    b.lens[b.k++] = (size_t)snprintf(b.p, NUM, "%lld", (long long)(6 * announce_period() / RM_MSEC(1)));
    b.p += NUM;
    b.argv[b.k] = b.p, b.lens[b.k++] = (size_t)snprintf(b.p, NUM, "%d", me.pairs);
    b.p += NUM;
    for (int i = 0; i < 2 * me.pairs; i++) b.argv[b.k] = me.argv[i], b.lens[b.k++] = me.lens[i];
    rm_watchdog_each_hold_locked(ep, holds, add_hold, &b);
    *call = (struct rm_watchdog_call){ RM_SCRIPT_ANNOUNCE, 1, (int)b.k, b.argv, b.lens, mem };
    return 1;
}

/* Answered or not (unreachable, or an ACL without the registry): again at
 * the next period; nothing depends on it. */
static rm_nsec announce_done(void *arg, int answered, rm_nsec sent, rm_nsec now)
{
    RM_UNUSED(arg);
    return (answered ? sent : now) + announce_period();
}

static const struct rm_watchdog_periodic announce = { announce_build, announce_done };

void rm_registry_hold_added(struct rm_endpoint *ep, const char *owner, size_t owner_len)
{
    if (!rm_registry_enabled()) return;
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

static void copy(char *dst, size_t n, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING) snprintf(dst, n, "%.*s", (int)r->len, r->str);
    else dst[0] = 0;
}

void rm_registry_read(const redisReply *r, int64_t server_time_ms,
                      const struct rm_registry_fields *f)
{
    *f->held_ms = -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6) return;
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
