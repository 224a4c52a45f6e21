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
 * Nothing of it is on the lock's path: the watchdog writes it
 * (announce.lua, one call; the entry is rewritten whole, so holds let go
 * of drop out), at the process's first hold, again about a second after
 * any new hold if that is still held, and every default-lease/3 while the
 * process holds anything.  It lives two default leases, so it lapses soon
 * after the process stops holding or dies, and it never outlives its
 * holds by much.  How long a hold has lasted is sent, not when it began:
 * the script turns it into server time, and the reader compares it with
 * server time -- no client clock is ever compared with another.  A hold
 * younger than the last announcement shows as "unknown" for about a
 * second; a hold released and taken again by the same thread within that
 * second shows the earlier acquisition's age until the next one.
 *
 * The reader is rmutex_inspect (whois.lua on the node that serves the
 * registry key: in a cluster, not the lock's).  RMUTEX_ANNOUNCE=0 in the
 * environment turns announcing off; holds then show by owner id only. */
#include "registry.h"

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

static void copy(char *dst, size_t n, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING) snprintf(dst, n, "%.*s", (int)r->len, r->str);
    else dst[0] = 0;
}

void rm_registry_read(const redisReply *r, rmutex_lockinfo_t *info)
{
    info->held_ms = -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6) return;
    redisReply **e = r->element;
    if (e[1]->type != REDIS_REPLY_STRING) return; /* no entry */
    info->holder_known = 1;
    info->holder_pid = strtol(e[1]->str, NULL, 10);
    copy(info->holder_host, sizeof info->holder_host, e[0]);
    copy(info->holder_exe, sizeof info->holder_exe, e[2]);
    copy(info->holder_cmd, sizeof info->holder_cmd, e[3]);
    copy(info->holder_lib, sizeof info->holder_lib, e[4]);
    if (e[5]->type == REDIS_REPLY_STRING) {
        long long since = strtoll(e[5]->str, NULL, 10);
        if (since > 0 && since <= info->server_time_ms) info->held_ms = info->server_time_ms - since;
    }
}
