/* config.c -- URL parsing and the process-wide settings.
 *
 *   redis://[[user]:password@]host[:port][/db][?opt=value&...]
 *   unix://[[user]:password@]/path/to/socket[?db=N&opt=value&...]
 *
 * User and password may be percent-encoded.  The host is resolved here, by
 * rmutex_configure() or the first call, and never again: a timed call never
 * waits on a resolver.  Options set only what they name, so settings made
 * with rmutex_set_*() before the first call survive the lazy parse of
 * RMUTEX_URL.  A URL is applied only when all of it is good. */
#include "config.h"
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

/* The defaults.  An option a URL does not name keeps its current value:
 * the default, or what an earlier URL or setter gave it. */
#define DEF_POOL 8
#define DEF_LEASE 30000
#define DEF_WAITER_LEASE 3000
#define DEF_CONNECT 1000
#define DEF_COMMAND 2000
#define DEF_POLL 2000
#define DEF_IDLE 10000
#define DEF_CACHE_MIN_HOLD 5
#define DEF_CACHE_IDLE 100
#define DEF_CACHE_PARK 1
#define DEF_WAIT 1000

struct rm_settings rm_settings = {
    .pool_size = DEF_POOL,
    .lease_ms = DEF_LEASE,
    .waiter_lease_ms = DEF_WAITER_LEASE,
    .connect_timeout_ms = DEF_CONNECT,
    .command_timeout_ms = DEF_COMMAND,
    .poll_ms = DEF_POLL,
    .idle_ms = DEF_IDLE,
    .cache_min_hold_ms = DEF_CACHE_MIN_HOLD,
    .cache_idle_ms = DEF_CACHE_IDLE,
    .cache_park_ms = DEF_CACHE_PARK,
    .replicas = 0,
    .min_replicas = 0,
    .wait_timeout_ms = DEF_WAIT,
};

#define LEASE_MIN 100UL

struct option {
    const char *name;
    unsigned long min, max;
    int set;
    unsigned long value;
};

enum { OPT_POOL, OPT_LEASE, OPT_WAITER_LEASE, OPT_CONNECT, OPT_COMMAND, OPT_POLL, OPT_IDLE,
       OPT_CACHE_MIN_HOLD, OPT_CACHE_IDLE, OPT_CACHE_PARK,
       OPT_REPLICAS, OPT_MIN_REPLICAS, OPT_WAIT, OPT_DB, OPT_REFRESH,
       OPT_SENTINEL_USER, OPT_SENTINEL_PASSWORD, OPT_COUNT };

static void options_init(struct option *o)
{
    static const struct option defs[OPT_COUNT] = {
        [OPT_POOL] = { "pool", 1, 1024, 0, DEF_POOL },
        [OPT_LEASE] = { "lease", LEASE_MIN, RM_LEASE_MAX, 0, DEF_LEASE },
        [OPT_WAITER_LEASE] = { "waiter_lease", LEASE_MIN, RM_LEASE_MAX, 0, DEF_WAITER_LEASE },
        [OPT_CONNECT] = { "connect_timeout", 1, 3600000, 0, DEF_CONNECT },
        [OPT_COMMAND] = { "command_timeout", 1, 3600000, 0, DEF_COMMAND },
        [OPT_POLL] = { "poll", 1, 3600000, 0, DEF_POLL },
        [OPT_IDLE] = { "idle", 0, 86400000, 0, DEF_IDLE },
        [OPT_CACHE_MIN_HOLD] = { "cache_min_hold", 0, 3600000, 0, DEF_CACHE_MIN_HOLD },
        [OPT_CACHE_IDLE] = { "cache_idle", 1, 3600000, 0, DEF_CACHE_IDLE },
        [OPT_CACHE_PARK] = { "cache_park", 0, 3600000, 0, DEF_CACHE_PARK },
        [OPT_REPLICAS] = { "replicas", 0, 1000, 0, 0 }, /* or "auto" */
        [OPT_MIN_REPLICAS] = { "min_replicas", 0, 1000, 0, 0 },
        [OPT_WAIT] = { "wait_timeout", 1, 3600000, 0, DEF_WAIT },
        [OPT_DB] = { "db", 0, 1000000, 0, 0 },
        [OPT_REFRESH] = { "refresh", 100, 3600000, 0, 0 },
        [OPT_SENTINEL_USER] = { "sentinel_user", 0, 0, 0, 0 },         /* strings: */
        [OPT_SENTINEL_PASSWORD] = { "sentinel_password", 0, 0, 0, 0 }, /* see parse_query */
    };
    memcpy(o, defs, sizeof defs);
}

static void options_apply(const struct option *o)
{
#define APPLY(idx, field) \
    if (o[idx].set) atomic_store(&rm_settings.field, o[idx].value)
    APPLY(OPT_POOL, pool_size);
    APPLY(OPT_LEASE, lease_ms);
    APPLY(OPT_WAITER_LEASE, waiter_lease_ms);
    APPLY(OPT_CONNECT, connect_timeout_ms);
    APPLY(OPT_COMMAND, command_timeout_ms);
    APPLY(OPT_POLL, poll_ms);
    APPLY(OPT_IDLE, idle_ms);
    APPLY(OPT_CACHE_MIN_HOLD, cache_min_hold_ms);
    APPLY(OPT_CACHE_IDLE, cache_idle_ms);
    APPLY(OPT_CACHE_PARK, cache_park_ms);
    APPLY(OPT_REPLICAS, replicas);
    APPLY(OPT_MIN_REPLICAS, min_replicas);
    APPLY(OPT_WAIT, wait_timeout_ms);
#undef APPLY
}

/* Parse a decimal in [min, max] from s[0..n). */
static int parse_ulong(const char *s, size_t n, unsigned long min, unsigned long max,
                       unsigned long *out)
{
    if (n == 0 || n > 19) return -1;
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into a new string; NULL on a bad escape or ENOMEM
 * (*bad tells which). */
static char *decode(const char *s, size_t n, int *bad)
{
    char *out = malloc(n + 1), *p = out;
    *bad = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                *bad = 1;
                free(out);
                return NULL;
            }
            *p++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *p++ = s[i];
        }
    }
    *p = 0;
    return out;
}

/* The query string: numeric options into o[], the sentinel's login into
 * *suser / *spass (percent-decoded, allocated). */
static int parse_query(const char *q, struct option *o, char **suser, char **spass)
{
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        if (!eq) { rm_detail("URL option without a value"); return EINVAL; }
        size_t klen = (size_t)(eq - q);
        int i;
        for (i = 0; i < OPT_COUNT; i++)
            if (strlen(o[i].name) == klen && !memcmp(o[i].name, q, klen)) break;
        if (i == OPT_COUNT) {
            rm_detail("unknown URL option '%.*s'", (int)(klen > 40 ? 40 : klen), q);
            return EINVAL;
        }
        if (i == OPT_SENTINEL_USER || i == OPT_SENTINEL_PASSWORD) {
            char **to = i == OPT_SENTINEL_USER ? suser : spass;
            int bad = 0;
            free(*to);
            if (!(*to = decode(eq + 1, len - klen - 1, &bad))) {
                rm_detail(bad ? "bad percent-escape in URL option %s" : "out of memory", o[i].name);
                return bad ? EINVAL : ENOMEM;
            }
        } else if (i == OPT_REPLICAS && len - klen - 1 == 4 && !memcmp(eq + 1, "auto", 4)) {
            o[i].value = RM_REPLICAS_AUTO;
        } else if (parse_ulong(eq + 1, len - klen - 1, o[i].min, o[i].max, &o[i].value)) {
            rm_detail("URL option %s must be a number in [%lu, %lu]", o[i].name, o[i].min, o[i].max);
            return EINVAL;
        }
        o[i].set = 1;
        q += len + (amp ? 1 : 0);
    }
    return 0;
}

/* Split "user:password@" off the front of s (ending before end).  Returns
 * the position after it. */
static int parse_userinfo(const char *s, const char *end, char **user, char **password,
                          const char **rest)
{
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@') at = p;
    *rest = s;
    if (!at) return 0;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    int bad = 0;
    if (colon) {
        if (colon > s && !(*user = decode(s, (size_t)(colon - s), &bad))) goto fail;
        if (!(*password = decode(colon + 1, (size_t)(at - colon - 1), &bad))) goto fail;
    } else if (at > s) {
        /* redis://secret@host: a lone word is a password, as redis-cli takes it. */
        if (!(*password = decode(s, (size_t)(at - s), &bad))) goto fail;
    }
    *rest = at + 1;
    return 0;
fail:
    free(*user);
    *user = NULL;
    rm_detail(bad ? "bad percent-escape in the URL's user or password" : "out of memory");
    return bad ? EINVAL : ENOMEM;
}

static int resolve(const char *host, unsigned long port, struct rm_server_addr *a)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
#ifdef RM_CONFIG_NO_DNS
    hints.ai_flags = AI_NUMERICHOST; /* the fuzz targets (fuzz/): never ask a resolver */
#endif
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%lu", port);
    int r = getaddrinfo(host, portstr, &hints, &res);
    if (r) {
        rm_detail("cannot resolve host '%.64s': %s", host, gai_strerror(r));
        return r == EAI_AGAIN ? EAGAIN : r == EAI_MEMORY ? ENOMEM : EINVAL;
    }
    memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
    a->salen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* "host[:port]" or "[v6][:port]" in s[0..end): resolve into a, and say it
 * in a->display (after the login part, prefix). */
static int parse_hostport(const char *s, const char *end, struct rm_server_addr *a,
                          const char *prefix)
{
    const char *hp = s, *portp = NULL, *he;
    if (*hp == '[') {
        const char *rb = memchr(hp, ']', (size_t)(end - hp));
        if (!rb) { rm_detail("unterminated [IPv6] host in URL"); return EINVAL; }
        he = rb;
        hp++;
        if (rb + 1 < end) {
            if (rb[1] != ':') { rm_detail("garbage after ] in URL host"); return EINVAL; }
            portp = rb + 2;
        }
    } else {
        const char *colon = memchr(hp, ':', (size_t)(end - hp));
        he = colon ? colon : end;
        if (colon) portp = colon + 1;
    }
    if (he == hp) { rm_detail("URL has no host"); return EINVAL; }
    unsigned long port = 6379;
    if (portp && parse_ulong(portp, (size_t)(end - portp), 1, 65535, &port)) {
        rm_detail("URL port must be a number in [1, 65535]");
        return EINVAL;
    }
    char host[256];
    if ((size_t)(he - hp) >= sizeof host) { rm_detail("URL host name too long"); return EINVAL; }
    memcpy(host, hp, (size_t)(he - hp));
    host[he - hp] = 0;
    int r = resolve(host, port, a);
    if (r) return r;
    int v6 = a->sa.ss_family == AF_INET6;
    snprintf(a->display, sizeof a->display, "%s%s%.64s%s:%lu", prefix, v6 ? "[" : "", host,
             v6 ? "]" : "", port);
    return 0;
}

/* The login part for the display: never the password; the user is cut
 * so that a long one cannot push the host out. */
static void login_display(char *buf, size_t n, const char *scheme, const char *user,
                          const char *password)
{
    snprintf(buf, n, "%s%.32s%s%s", scheme, user ? user : "", password ? ":***" : "",
             (user || password) ? "@" : "");
}

/* Copy the login (user, password, db) of from into to. */
static int copy_login(struct rm_server_addr *to, const char *user, const char *password, int db)
{
    to->db = db;
    if ((user && !(to->user = strdup(user))) || (password && !(to->password = strdup(password)))) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    return 0;
}

/* A comma-separated list of host:port in s[0..end) into svc->seeds, each
 * with the login given. */
static int parse_seeds(const char *s, const char *end, struct rm_service *svc, const char *scheme,
                       const char *user, const char *password, int db)
{
    char prefix[64];
    login_display(prefix, sizeof prefix, scheme, user, password);
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        if (svc->nseeds == RM_SEEDS_MAX) {
            rm_detail("more than %d hosts in the URL", RM_SEEDS_MAX);
            return EINVAL;
        }
        struct rm_server_addr *a = &svc->seeds[svc->nseeds];
        memset(a, 0, sizeof *a);
        int r = parse_hostport(s, e, a, svc->nseeds ? "" : prefix);
        if (!r) r = copy_login(a, user, password, db);
        svc->nseeds++;
        if (r) return r;
        s = comma ? comma + 1 : end;
        if (comma && s == end) { rm_detail("URL host list ends with a comma"); return EINVAL; }
    }
    if (!svc->nseeds) { rm_detail("URL has no host"); return EINVAL; }
    size_t off = 0;
    for (unsigned i = 0; i < svc->nseeds && off + 1 < sizeof svc->display; i++) {
        int w = snprintf(svc->display + off, sizeof svc->display - off, "%s%s", i ? "," : "",
                         svc->seeds[i].display);
        if (w < 0) break;
        off += (size_t)w;
    }
    return 0;
}

int rm_config_parse(const char *url, struct rm_service *out, int apply)
{
    struct rm_service svc;
    struct option o[OPT_COUNT];
    char *user = NULL, *password = NULL, *suser = NULL, *spass = NULL;
    int r = EINVAL;

    memset(&svc, 0, sizeof svc);
    options_init(o);
    if (!url) { rm_detail("no URL"); return EINVAL; }
    if (strlen(url) > 4096) { rm_detail("URL too long"); return EINVAL; }
    if (!(svc.seeds = calloc(RM_SEEDS_MAX, sizeof *svc.seeds))) {
        rm_detail("out of memory");
        return ENOMEM;
    }

    const char *q = strchr(url, '?');
    const char *end = q ? q : url + strlen(url);
    if (q && (r = parse_query(q + 1, o, &suser, &spass))) goto out;
    r = EINVAL;
    int db_opt = o[OPT_DB].set ? (int)o[OPT_DB].value : -1;

    if (!strncmp(url, "rediss://", 9)) {
        rm_detail("rediss:// needs TLS, which hiredis 0.14 does not have");
        r = ENOTSUP;
        goto out;
    }
    if (!strncmp(url, "unix://", 7)) {
        const char *rest;
        struct rm_server_addr *a = &svc.seeds[0];
        if ((r = parse_userinfo(url + 7, end, &user, &password, &rest))) goto out;
        r = EINVAL;
        size_t plen = (size_t)(end - rest);
        struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;
        if (plen == 0 || rest[0] != '/') { rm_detail("unix:// URL needs an absolute socket path"); goto out; }
        if (plen >= sizeof un->sun_path) { rm_detail("unix socket path too long"); goto out; }
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, rest, plen);
        a->salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + 1);
        svc.nseeds = 1;
        if ((r = copy_login(a, user, password, db_opt < 0 ? 0 : db_opt))) goto out;
        r = EINVAL;
        snprintf(a->display, sizeof a->display, "unix://%s%.*s", password ? "***@" : "",
                 (int)(plen > 120 ? 120 : plen), rest);
        snprintf(svc.display, sizeof svc.display, "%s", a->display);
    } else if (!strncmp(url, "redis://", 8)) {
        const char *rest;
        if ((r = parse_userinfo(url + 8, end, &user, &password, &rest))) goto out;
        r = EINVAL;
        const char *slash = memchr(rest, '/', (size_t)(end - rest));
        unsigned long db = 0;
        if (slash && slash + 1 < end && parse_ulong(slash + 1, (size_t)(end - slash - 1), 0, 1000000, &db)) {
            rm_detail("URL path must be a database number");
            goto out;
        }
        if (memchr(rest, ',', (size_t)((slash ? slash : end) - rest))) {
            rm_detail("redis:// names one server; a cluster is redis-cluster://h1:p1,h2:p2");
            goto out;
        }
        int d = db_opt >= 0 ? db_opt : (int)db;
        if ((r = parse_seeds(rest, slash ? slash : end, &svc, "redis://", user, password, d))) goto out;
        r = EINVAL;
        size_t n = strlen(svc.display);
        snprintf(svc.display + n, sizeof svc.display - n, "/%d", d);
        snprintf(svc.seeds[0].display, sizeof svc.seeds[0].display, "%s", svc.display);
    } else if (!strncmp(url, "redis-cluster://", 16)) {
        const char *rest;
        svc.mode = RM_MODE_CLUSTER;
        if ((r = parse_userinfo(url + 16, end, &user, &password, &rest))) goto out;
        r = EINVAL;
        if (memchr(rest, '/', (size_t)(end - rest)) && end[-1] != '/') {
            rm_detail("a redis-cluster:// URL has no path (a cluster has only database 0)");
            goto out;
        }
        if (db_opt > 0) { rm_detail("Redis Cluster has only database 0"); goto out; }
        if ((r = parse_seeds(rest, end[-1] == '/' ? end - 1 : end, &svc, "redis-cluster://", user,
                             password, 0)))
            goto out;
    } else if (!strncmp(url, "redis-sentinel://", 17)) {
        const char *rest;
        svc.mode = RM_MODE_SENTINEL;
        if ((r = parse_userinfo(url + 17, end, &user, &password, &rest))) goto out;
        r = EINVAL;
        const char *slash = memchr(rest, '/', (size_t)(end - rest));
        if (!slash || slash + 1 == end) {
            rm_detail("a redis-sentinel:// URL ends with /MASTER-NAME");
            goto out;
        }
        size_t mlen = (size_t)(end - slash - 1);
        if (mlen >= sizeof svc.master || memchr(slash + 1, '/', mlen)) {
            rm_detail("bad master name in the URL (one path element, at most %zu bytes)",
                      sizeof svc.master - 1);
            goto out;
        }
        memcpy(svc.master, slash + 1, mlen);
        if ((r = parse_seeds(rest, slash, &svc, "redis-sentinel://", suser, spass, 0))) goto out;
        r = EINVAL;
        /* The data nodes' login is the URL's; the sentinels' are options. */
        svc.node_login.db = db_opt < 0 ? 0 : db_opt;
        if ((r = copy_login(&svc.node_login, user, password, svc.node_login.db))) goto out;
        size_t n = strlen(svc.display);
        snprintf(svc.display + n, sizeof svc.display - n, "/%.64s", svc.master);
    } else {
        rm_detail("URL must start with redis://, unix://, redis-cluster:// or redis-sentinel://");
        goto out;
    }
    r = EINVAL;
    if (svc.mode != RM_MODE_SENTINEL && (suser || spass)) {
        rm_detail("sentinel_user and sentinel_password belong in a redis-sentinel:// URL");
        goto out;
    }
    if ((user && !password) || (suser && !spass)) {
        rm_detail("URL has a user but no password");
        goto out;
    }
    if (svc.mode == RM_MODE_CLUSTER && (r = copy_login(&svc.node_login, user, password, 0)))
        goto out;
    r = 0;
    svc.refresh_ms = o[OPT_REFRESH].set ? o[OPT_REFRESH].value
                     : svc.mode == RM_MODE_SENTINEL ? 1000 : 5000;
    if (apply) options_apply(o);
    *out = svc;
    memset(&svc, 0, sizeof svc);
out:
    free(user);
    free(suser);
    if (password) explicit_bzero(password, strlen(password));
    if (spass) explicit_bzero(spass, strlen(spass));
    free(password);
    free(spass);
    rm_config_service_free(&svc);
    return r;
}

int rm_config_service_copy(const struct rm_service *from, struct rm_service *to)
{
    *to = *from;
    if (!(to->seeds = calloc(RM_SEEDS_MAX, sizeof *to->seeds))) return ENOMEM;
    memcpy(to->seeds, from->seeds, from->nseeds * sizeof *to->seeds);
    for (unsigned i = 0; i < from->nseeds; i++) to->seeds[i].user = to->seeds[i].password = NULL;
    to->node_login.user = to->node_login.password = NULL;
    int r = 0;
    for (unsigned i = 0; !r && i < from->nseeds; i++)
        r = copy_login(&to->seeds[i], from->seeds[i].user, from->seeds[i].password, from->seeds[i].db);
    if (!r) r = copy_login(&to->node_login, from->node_login.user, from->node_login.password,
                           from->node_login.db);
    if (r) rm_config_service_free(to);
    return r;
}

void rm_config_service_free(struct rm_service *svc)
{
    for (unsigned i = 0; i < svc->nseeds; i++) rm_config_addr_free(&svc->seeds[i]);
    rm_config_addr_free(&svc->node_login);
    free(svc->seeds);
    svc->seeds = NULL;
    svc->nseeds = 0;
}

int rm_config_node_addr(const char *host, unsigned port, const struct rm_server_addr *login,
                        struct rm_server_addr *out)
{
    memset(out, 0, sizeof *out);
    int r = resolve(host, port, out);
    if (!r) r = copy_login(out, login->user, login->password, login->db);
    if (r) {
        rm_config_addr_free(out);
        return r;
    }
    int v6 = out->sa.ss_family == AF_INET6;
    snprintf(out->display, sizeof out->display, "%s%.64s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
             port);
    return 0;
}

int rm_config_same_addr(const struct rm_server_addr *a, const struct rm_server_addr *b)
{
    return a->salen == b->salen && !memcmp(&a->sa, &b->sa, a->salen);
}

void rm_config_addr_free(struct rm_server_addr *a)
{
    free(a->user);
    if (a->password) {
        explicit_bzero(a->password, strlen(a->password));
        free(a->password);
    }
    a->user = a->password = NULL;
}

/* ---- public setters ---- */

RMUTEX_API int rmutex_set_pool_size(unsigned n)
{
    if (n < 1 || n > 1024) return EINVAL;
    atomic_store(&rm_settings.pool_size, n);
    return 0;
}

RMUTEX_API int rmutex_set_default_lease(unsigned long lease_ms)
{
    if (lease_ms < LEASE_MIN || lease_ms > RM_LEASE_MAX) return EINVAL;
    atomic_store(&rm_settings.lease_ms, lease_ms);
    return 0;
}

RMUTEX_API int rmutex_set_wait_replicas(unsigned n, unsigned long timeout_ms)
{
    if ((n > 1000 && n != RMUTEX_WAIT_AUTO) || (n && (timeout_ms < 1 || timeout_ms > 3600000)))
        return EINVAL;
    atomic_store(&rm_settings.replicas, n);
    if (n) atomic_store(&rm_settings.wait_timeout_ms, timeout_ms);
    return 0;
}

RMUTEX_API int rmutex_set_min_replicas(unsigned n)
{
    if (n > 1000) return EINVAL;
    atomic_store(&rm_settings.min_replicas, n);
    return 0;
}
