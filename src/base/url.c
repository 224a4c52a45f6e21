/* url.c -- the pieces of a URL that every scheme shares.
 *
 * Every scheme (config.c) is a login, then something of its own, then the
 * query (options.c); this file has the common parts: decimals,
 * percent-escapes, the "user:password@" login, the "host:port,..." list
 * and the resolver.  User and password may be percent-encoded.  A host is
 * resolved here, when the URL is parsed (rmutex_configure or the first
 * call), and never again: a timed call never waits on a resolver.  A
 * display string (details, the debug log) never holds a password. */
#include "url.h"
#include "internal.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rm_url_number(const char *s, size_t n, unsigned long min, unsigned long max,
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

char *rm_url_decode(const char *s, size_t n, int *bad)
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

int rm_url_login(const char *s, const char *end, char **user, char **password, const char **rest)
{
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@') at = p;
    *rest = s;
    if (!at) return 0;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    int bad = 0;
    if (colon) {
        if (colon > s && !(*user = rm_url_decode(s, (size_t)(colon - s), &bad))) goto fail;
        if (!(*password = rm_url_decode(colon + 1, (size_t)(at - colon - 1), &bad))) goto fail;
    } else if (at > s) {
        /* redis://secret@host: a lone word is a password, as redis-cli takes it. */
        if (!(*password = rm_url_decode(s, (size_t)(at - s), &bad))) goto fail;
    }
    *rest = at + 1;
    return 0;
fail:
    free(*user);
    *user = NULL;
    rm_detail(bad ? "bad percent-escape in the URL's user or password" : "out of memory");
    return bad ? EINVAL : ENOMEM;
}

int rm_url_resolve(const char *host, unsigned long port, struct rm_server_addr *a)
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
    snprintf(a->host, sizeof a->host, "%s", host);
    freeaddrinfo(res);
    return 0;
}

/* "host[:port]" or "[v6][:port]" in s[0..end): resolve into a, and say it
 * in a->display (after the login part, prefix). */
static int hostport(const char *s, const char *end, struct rm_server_addr *a, const char *prefix)
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
    if (portp && rm_url_number(portp, (size_t)(end - portp), 1, 65535, &port)) {
        rm_detail("URL port must be a number in [1, 65535]");
        return EINVAL;
    }
    char host[256];
    if ((size_t)(he - hp) >= sizeof host) { rm_detail("URL host name too long"); return EINVAL; }
    memcpy(host, hp, (size_t)(he - hp));
    host[he - hp] = 0;
    int r = rm_url_resolve(host, port, a);
    if (r) return r;
    int v6 = a->sa.ss_family == AF_INET6;
    snprintf(a->display, sizeof a->display, "%s%s%.64s%s:%lu", prefix, v6 ? "[" : "", host,
             v6 ? "]" : "", port);
    return 0;
}

int rm_url_set_login(struct rm_server_addr *to, const char *user, const char *password, int db)
{
    to->db = db;
    if ((user && !(to->user = strdup(user))) || (password && !(to->password = strdup(password)))) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    return 0;
}

int rm_url_hosts(const char *s, const char *end, struct rm_service *svc, const char *scheme,
                 const char *user, const char *password, int db)
{
    /* The login part for the display: never the password; the user is cut
     * so that a long one cannot push the host out. */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s%.32s%s%s", scheme, user ? user : "",
             password ? ":***" : "", (user || password) ? "@" : "");
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        if (svc->nseeds == RM_SEEDS_MAX) {
            rm_detail("more than %d hosts in the URL", RM_SEEDS_MAX);
            return EINVAL;
        }
        struct rm_server_addr *a = &svc->seeds[svc->nseeds];
        memset(a, 0, sizeof *a);
        int r = hostport(s, e, a, svc->nseeds ? "" : prefix);
        if (!r) r = rm_url_set_login(a, user, password, db);
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
