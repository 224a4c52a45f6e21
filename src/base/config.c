/* config.c -- a URL into the deployment it names (struct rm_service).
 *
 *   redis://[[user]:password@]host[:port][/db][?opt=value&...]
 *   rediss://...  the same, over TLS
 *   unix://[[user]:password@]/path/to/socket[?db=N&opt=value&...]
 *   redis-cluster://[[user]:password@]host:port[,host:port...][?...]
 *   redis-sentinel://[[user]:password@]host:port[,host:port...]/MASTER[?...]
 *
 * A URL is its scheme, the scheme's own part, and the query.  The query is
 * the same for every scheme (options.c, from options.def) and is read
 * first; then the scheme's function, found in the table below, reads its
 * part with the pieces they all share (url.c: the login, host lists, the
 * resolver).  So a new scheme is one entry in the table and its function:
 * rediss:// is redis:// with TLS.  Each function takes the URL's login
 * itself (scheme_login), first, so that one may refuse before reading
 * anything.  What holds for every scheme is checked here, after it: the
 * sentinels' login belongs to redis-sentinel:// only, and TLS's options to
 * a URL with TLS.
 *
 * TLS (rediss://, or tls=1 on any TCP URL: a cluster's and Sentinel's
 * have no scheme of their own) is one struct rm_tls_conf per service: its
 * options, and a pointer to it in every address, the seeds' and the ones
 * the topology names later (rm_config_node_addr copies it from the login
 * it is given), so that each connection knows whether and how to speak
 * TLS and which name to check.  The files it names are checked for being
 * readable here, so that a typo is EINVAL at rmutex_configure; what is in
 * them is read at the first connection (net/tls.c).
 *
 * A URL is applied only when all of it is good: the service is handed out
 * and the options set the settings only then, so a bad URL changes
 * nothing. */
#include "config.h"
#include "internal.h"
#include "options.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* What a scheme's function reads and fills. */
struct url {
    const char *prefix;         /* "redis://", ...: what the display starts with */
    int tls;                    /* the scheme says TLS (rediss://) */
    const char *at, *end;       /* its part: after "scheme://", up to the query */
    const struct rm_options *o; /* the query's options */
    char *user, *password;      /* the URL's login, once the function took it */
    struct rm_service *svc;
};

static int scheme_login(struct url *u, const char **rest)
{
    return rm_url_login(u->at, u->end, &u->user, &u->password, rest);
}

/* unix://[login@]/path: one server, on a socket. */
static int scheme_unix(struct url *u)
{
    const char *rest;
    struct rm_server_addr *a = &u->svc->seeds[0];
    int r = scheme_login(u, &rest);
    if (r) return r;
    size_t plen = (size_t)(u->end - rest);
    struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;
    if (plen == 0 || rest[0] != '/') {
        rm_detail("unix:// URL needs an absolute socket path");
        return EINVAL;
    }
    if (plen >= sizeof un->sun_path) { rm_detail("unix socket path too long"); return EINVAL; }
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, rest, plen);
    a->salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + 1);
    u->svc->nseeds = 1;
    if ((r = rm_url_set_login(a, u->user, u->password, (int)u->o->value[RM_OPT_db]))) return r;
    snprintf(a->display, sizeof a->display, "unix://%s%.*s", u->password ? "***@" : "",
             (int)(plen > 120 ? 120 : plen), rest);
    snprintf(u->svc->display, sizeof u->svc->display, "%s", a->display);
    return 0;
}

/* redis://[login@]host[:port][/db]: one server; the db option wins over
 * the path. */
static int scheme_redis(struct url *u)
{
    const char *rest;
    int r = scheme_login(u, &rest);
    if (r) return r;
    const char *slash = memchr(rest, '/', (size_t)(u->end - rest));
    unsigned long db = 0;
    if (slash && slash + 1 < u->end &&
        rm_url_number(slash + 1, (size_t)(u->end - slash - 1), 0, 1000000, &db)) {
        rm_detail("URL path must be a database number");
        return EINVAL;
    }
    if (memchr(rest, ',', (size_t)((slash ? slash : u->end) - rest))) {
        rm_detail("redis:// names one server; a cluster is redis-cluster://h1:p1,h2:p2");
        return EINVAL;
    }
    struct rm_service *svc = u->svc;
    int d = u->o->set[RM_OPT_db] ? (int)u->o->value[RM_OPT_db] : (int)db;
    if ((r = rm_url_hosts(rest, slash ? slash : u->end, svc, u->prefix, u->user, u->password, d)))
        return r;
    size_t n = strlen(svc->display);
    snprintf(svc->display + n, sizeof svc->display - n, "/%d", d);
    snprintf(svc->seeds[0].display, sizeof svc->seeds[0].display, "%s", svc->display);
    return 0;
}

/* rediss://: redis:// over TLS. */
static int scheme_rediss(struct url *u)
{
    u->tls = 1;
    return scheme_redis(u);
}

/* redis-cluster://[login@]seed[,seed...][/]: the seeds of a cluster, whose
 * nodes all take the URL's login; database 0 only. */
static int scheme_cluster(struct url *u)
{
    const char *rest, *end = u->end;
    int r = scheme_login(u, &rest);
    if (r) return r;
    if (memchr(rest, '/', (size_t)(end - rest)) && end[-1] != '/') {
        rm_detail("a redis-cluster:// URL has no path (a cluster has only database 0)");
        return EINVAL;
    }
    if (u->o->value[RM_OPT_db] > 0) { rm_detail("Redis Cluster has only database 0"); return EINVAL; }
    if ((r = rm_url_hosts(rest, end[-1] == '/' ? end - 1 : end, u->svc, u->prefix,
                          u->user, u->password, 0)))
        return r;
    return rm_url_set_login(&u->svc->node_login, u->user, u->password, 0);
}

/* redis-sentinel://[login@]sentinel[,sentinel...]/MASTER: the sentinels,
 * with their own login (options sentinel_user, sentinel_password); the
 * URL's login and db are the data nodes'. */
static int scheme_sentinel(struct url *u)
{
    const char *rest, *end = u->end;
    struct rm_service *svc = u->svc;
    int r = scheme_login(u, &rest);
    if (r) return r;
    const char *slash = memchr(rest, '/', (size_t)(end - rest));
    if (!slash || slash + 1 == end) {
        rm_detail("a redis-sentinel:// URL ends with /MASTER-NAME");
        return EINVAL;
    }
    size_t mlen = (size_t)(end - slash - 1);
    if (mlen >= sizeof svc->master || memchr(slash + 1, '/', mlen)) {
        rm_detail("bad master name in the URL (one path element, at most %zu bytes)",
                  sizeof svc->master - 1);
        return EINVAL;
    }
    memcpy(svc->master, slash + 1, mlen);
    if ((r = rm_url_hosts(rest, slash, svc, u->prefix, u->o->sentinel_user,
                          u->o->sentinel_password, 0)))
        return r;
    if ((r = rm_url_set_login(&svc->node_login, u->user, u->password, (int)u->o->value[RM_OPT_db])))
        return r;
    size_t n = strlen(svc->display);
    snprintf(svc->display + n, sizeof svc->display - n, "/%.64s", svc->master);
    return 0;
}

static const struct scheme {
    const char *prefix;
    int mode;
    int (*parse)(struct url *u);
    unsigned long refresh_ms; /* the refresh option's default here; 0: options.def's */
} schemes[] = {
    { "redis://", RM_MODE_SERVER, scheme_redis, 0 },
    { "rediss://", RM_MODE_SERVER, scheme_rediss, 0 },
    { "unix://", RM_MODE_SERVER, scheme_unix, 0 },
    { "redis-cluster://", RM_MODE_CLUSTER, scheme_cluster, 0 },
    { "redis-sentinel://", RM_MODE_SENTINEL, scheme_sentinel, 1000 },
};

static const struct scheme *scheme_of(const char *url)
{
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++)
        if (!strncmp(url, schemes[i].prefix, strlen(schemes[i].prefix))) return &schemes[i];
    rm_detail("URL must start with redis://, rediss://, unix://, redis-cluster:// or "
              "redis-sentinel://");
    return NULL;
}

/* A file option of TLS that must name something readable: 0 or EINVAL. */
static int readable(const char *what, const char *path, int dir)
{
    struct stat st;
    if (!path) return 0;
    if (stat(path, &st) || access(path, R_OK) || (dir ? !S_ISDIR(st.st_mode) : S_ISDIR(st.st_mode))) {
        rm_detail("TLS option %s: cannot read %s '%.200s'", what, dir ? "the directory" : "the file",
                  path);
        return EINVAL;
    }
    return 0;
}

/* TLS, when the scheme or tls=1 asks for it: the options into svc->tls
 * (taken from o), pointed at by every address; without TLS, its options
 * are refused. */
static int tls_conf(struct url *u, struct rm_options *o, struct rm_service *svc)
{
    int on = u->tls || o->value[RM_OPT_tls];
    if (!on) {
        if (o->cacert || o->capath || o->cert || o->key || o->sni || o->set[RM_OPT_insecure]) {
            rm_detail("TLS options (cacert, capath, cert, key, sni, insecure) need TLS: a "
                      "rediss:// URL, or tls=1");
            return EINVAL;
        }
        return 0;
    }
    if (svc->seeds[0].sa.ss_family == AF_UNIX) {
        rm_detail("a unix:// socket has no TLS");
        return EINVAL;
    }
    if (!o->cert != !o->key) {
        rm_detail("TLS options cert and key go together (the client's certificate and its key)");
        return EINVAL;
    }
    if (o->sni && (!*o->sni || strlen(o->sni) > 253)) {
        rm_detail("TLS option sni must be a host name (1 to 253 bytes)");
        return EINVAL;
    }
    int r;
    if ((r = readable("cacert", o->cacert, 0)) || (r = readable("capath", o->capath, 1)) ||
        (r = readable("cert", o->cert, 0)) || (r = readable("key", o->key, 0)))
        return r;
    if (!(svc->tls = calloc(1, sizeof *svc->tls))) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    struct rm_tls_conf *t = svc->tls;
    t->cacert = o->cacert, t->capath = o->capath, t->cert = o->cert, t->key = o->key;
    t->sni = o->sni;
    o->cacert = o->capath = o->cert = o->key = o->sni = NULL;
    t->insecure = (int)o->value[RM_OPT_insecure];
    for (unsigned i = 0; i < svc->nseeds; i++) svc->seeds[i].tls = t;
    svc->node_login.tls = t;
    if (!u->tls) { /* the display says what the scheme does not */
        size_t n = strlen(svc->display);
        snprintf(svc->display + n, sizeof svc->display - n, " (TLS)");
    }
    return 0;
}

int rm_config_parse(const char *url, struct rm_service *out, int apply)
{
    struct rm_service svc;
    struct rm_options o;
    struct url u = { .o = &o, .svc = &svc };
    const struct scheme *s;
    int r;

    memset(&svc, 0, sizeof svc);
    rm_options_init(&o);
    if (!url) { rm_detail("no URL"); return EINVAL; }
    if (strlen(url) > 4096) { rm_detail("URL too long"); return EINVAL; }
    if (!(svc.seeds = calloc(RM_SEEDS_MAX, sizeof *svc.seeds))) {
        rm_detail("out of memory");
        return ENOMEM;
    }

    const char *q = strchr(url, '?');
    u.end = q ? q : url + strlen(url);
    if (q && (r = rm_options_parse(q + 1, &o))) goto out;
    r = EINVAL;
    if (!(s = scheme_of(url))) goto out;
    u.prefix = s->prefix;
    u.at = url + strlen(s->prefix);
    svc.mode = s->mode;
    if ((r = s->parse(&u)) || (r = tls_conf(&u, &o, &svc))) goto out;
    r = EINVAL;
    if (svc.mode != RM_MODE_SENTINEL && (o.sentinel_user || o.sentinel_password)) {
        rm_detail("sentinel_user and sentinel_password belong in a redis-sentinel:// URL");
        goto out;
    }
    if (o.sentinel_user && !o.sentinel_password) {
        rm_detail("URL has a user but no password");
        goto out;
    }
    r = 0;
    svc.refresh_ms = o.set[RM_OPT_refresh] || !s->refresh_ms ? o.value[RM_OPT_refresh] : s->refresh_ms;
    if (apply) rm_options_apply(&o);
    if (svc.tls && svc.tls->insecure)
        rm_detail("warning: insecure=1: the TLS certificates of %s are not checked; anyone on the "
                  "path can pose as the server", svc.display);
    *out = svc;
    memset(&svc, 0, sizeof svc);
out:
    free(u.user);
    if (u.password) explicit_bzero(u.password, strlen(u.password));
    free(u.password);
    rm_options_free(&o);
    rm_config_service_free(&svc);
    return r;
}

static void tls_free(struct rm_tls_conf *t)
{
    if (!t) return;
    free(t->cacert), free(t->capath), free(t->cert), free(t->key), free(t->sni);
    free(t);
}

static int tls_copy(const struct rm_tls_conf *from, struct rm_tls_conf **to)
{
    struct rm_tls_conf *t = calloc(1, sizeof *t);
    int bad = !t;
#define COPY(f) if (t && from->f && !(t->f = strdup(from->f))) bad = 1
    COPY(cacert); COPY(capath); COPY(cert); COPY(key); COPY(sni);
#undef COPY
    if (bad) {
        tls_free(t);
        rm_detail("out of memory");
        return ENOMEM;
    }
    t->insecure = from->insecure;
    *to = t;
    return 0;
}

int rm_config_service_copy(const struct rm_service *from, struct rm_service *to)
{
    *to = *from;
    if (!(to->seeds = calloc(RM_SEEDS_MAX, sizeof *to->seeds))) return ENOMEM;
    memcpy(to->seeds, from->seeds, from->nseeds * sizeof *to->seeds);
    for (unsigned i = 0; i < from->nseeds; i++) to->seeds[i].user = to->seeds[i].password = NULL;
    to->node_login.user = to->node_login.password = NULL;
    to->tls = NULL;
    int r = 0;
    if (from->tls && !(r = tls_copy(from->tls, &to->tls))) {
        for (unsigned i = 0; i < from->nseeds; i++) to->seeds[i].tls = to->tls;
        to->node_login.tls = to->tls;
    }
    for (unsigned i = 0; !r && i < from->nseeds; i++)
        r = rm_url_set_login(&to->seeds[i], from->seeds[i].user, from->seeds[i].password,
                             from->seeds[i].db);
    if (!r)
        r = rm_url_set_login(&to->node_login, from->node_login.user, from->node_login.password,
                             from->node_login.db);
    if (r) rm_config_service_free(to);
    return r;
}

void rm_config_service_free(struct rm_service *svc)
{
    for (unsigned i = 0; i < svc->nseeds; i++) rm_config_addr_free(&svc->seeds[i]);
    rm_config_addr_free(&svc->node_login);
    tls_free(svc->tls);
    svc->tls = NULL;
    free(svc->seeds);
    svc->seeds = NULL;
    svc->nseeds = 0;
}

int rm_config_node_addr(const char *host, unsigned port, const struct rm_server_addr *login,
                        struct rm_server_addr *out)
{
    memset(out, 0, sizeof *out);
    int r = rm_url_resolve(host, port, out);
    if (!r) r = rm_url_set_login(out, login->user, login->password, login->db);
    out->tls = login->tls;
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
