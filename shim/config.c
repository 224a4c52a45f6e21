/* config.c -- parse RMUTEX_PRELOAD.
 *
 *   RMUTEX_PRELOAD = section *( "|" section )
 *   section        = programs ":" entry *( "," entry )
 *   programs       = pattern *( "," pattern )
 *   entry          = [ object ":" ] symbol [ "=" lockname ] *( ";" option )
 *                  | "/" sem-pattern *( ";" option )
 *   option         = "fair" | "robust" | "cache" | "lease=" milliseconds | "cond" | "rwlock"
 *                  | "once"
 *
 * For example
 *
 *   app: orders_lock=shop:orders;fair, stats_lock | worker*: libjobs.so:queue_lock=jobs;lease=60000
 *
 * makes the mutex orders_lock of every program called "app" a fair lock
 * named "shop:orders" and its stats_lock a non-fair lock named
 * "stats_lock", and queue_lock of libjobs.so in every program whose name
 * starts with "worker" a lock named "jobs" with a fixed 60 s lease.
 * "cond" makes the symbol a pthread_cond_t shared through Redis, "rwlock"
 * a pthread_rwlock_t (readers share it across processes; only lease= goes
 * with it), "once" a pthread_once_t whose routine then runs once for every
 * process (a ronce of the lock name; no other option).  An entry that
 * starts with "/" is not a symbol but a pattern
 * (fnmatch(3)) of sem_open names: "/jobs*" makes every semaphore the
 * program opens by a name that matches it an rsem of that name without the
 * slash; fair and lease= go with it.
 *
 * Programs: a pattern (fnmatch(3): *, ?, [...]) without a "/" is matched
 * against the base name of the executable (/proc/self/exe) and of argv[0];
 * one with a "/" against the executable's full path.  The program list
 * ends at the section's first ":", so lock names may contain colons.
 *
 * Entries: the symbol is a C identifier (dots allowed, for compiler-made
 * names such as "lock.1"); "object:" names the shared object that defines
 * it, by base name, where "libfoo.so" also matches "libfoo.so.1.2".  The
 * lock name is the rest of the entry up to ";", "," or "|", with blanks
 * trimmed; write those three characters, "%" and blanks inside a name as
 * %XX.  Blanks around every token are ignored, empty entries skipped.
 *
 * Errors: a malformed entry is reported and left out, the rest of the
 * section still applies.  A section without a ":" is reported in every
 * process (nobody can tell whom it was for); an error in a section for
 * some other program is never reported, so the shim stays silent there. */
#include "config.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_MAX 2147483647UL

struct span {
    const char *p;
    size_t n;
};

static struct span trim(const char *p, size_t n)
{
    while (n && isspace((unsigned char)*p)) p++, n--;
    while (n && isspace((unsigned char)p[n - 1])) n--;
    struct span s = { p, n };
    return s;
}

/* The next piece of s up to sep (or the end); advances s.  Returns 0 at the
 * end of s. */
static int next_piece(struct span *s, char sep, struct span *piece)
{
    if (!s->p) return 0;
    const char *e = memchr(s->p, sep, s->n);
    size_t n = e ? (size_t)(e - s->p) : s->n;
    *piece = trim(s->p, n);
    if (e) {
        s->n -= n + 1;
        s->p = e + 1;
    } else {
        s->p = NULL;
        s->n = 0;
    }
    return 1;
}

static int eq(struct span s, const char *lit) { return strlen(lit) == s.n && !memcmp(s.p, lit, s.n); }

struct ctx {
    rm_shim_errfn err;
    void *arg;
    int errors;
};

static void report(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct ctx *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->errors++;
    if (c->err) c->err(c->arg, buf);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int program_matches(struct span pat, const char *exe, const char *argv0)
{
    char p[512];
    if (pat.n == 0 || pat.n >= sizeof p) return 0;
    memcpy(p, pat.p, pat.n);
    p[pat.n] = 0;
    if (strchr(p, '/')) return exe && !fnmatch(p, exe, 0);
    return (exe && !fnmatch(p, base_name(exe), 0)) || (argv0 && !fnmatch(p, base_name(argv0), 0));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode a lock name.  NULL with *bad set on a bad escape or an
 * embedded NUL, NULL alone when out of memory. */
static char *decode_name(struct span s, int *bad)
{
    char *out = malloc(s.n + 1), *o = out;
    *bad = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] != '%') {
            *o++ = s.p[i];
            continue;
        }
        int hi = i + 1 < s.n ? hexval(s.p[i + 1]) : -1, lo = i + 2 < s.n ? hexval(s.p[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            *bad = 1;
            free(out);
            return NULL;
        }
        *o++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *o = 0;
    return out;
}

static int valid_symbol(struct span s)
{
    if (s.n == 0) return 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (!(isalpha(ch) || ch == '_' || ch == '.' || ch == '$' || (i > 0 && isdigit(ch))))
            return 0;
    }
    return 1;
}

static int valid_object(struct span s)
{
    if (s.n == 0) return 0;
    for (size_t i = 0; i < s.n; i++)
        if (isspace((unsigned char)s.p[i]) || s.p[i] == '/') return 0;
    return 1;
}

static int parse_lease(struct span v, unsigned long *out)
{
    if (v.n == 0 || v.n > 10) return -1;
    unsigned long x = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (!isdigit((unsigned char)v.p[i])) return -1;
        x = x * 10 + (unsigned long)(v.p[i] - '0');
    }
    if (x < 1 || x > LEASE_MAX) return -1;
    *out = x;
    return 0;
}

static char *dup_span(struct span s) { return strndup(s.p, s.n); }

/* A sem_open pattern's entry: the pattern (no blank, no '='), then fair
 * and lease=.  Returns as parse_entry. */
static int parse_sem_entry(struct ctx *c, struct span ent, struct span pattern, struct span rest,
                           struct rm_shim_entry *e)
{
    for (size_t i = 0; i < pattern.n; i++)
        if (isspace((unsigned char)pattern.p[i]) || pattern.p[i] == '=' || pattern.p[i] == ':') {
            report(c, "entry '%.*s': a sem_open pattern takes no lock name or object (the "
                      "semaphore's name is its own, without the slash)", (int)ent.n, ent.p);
            return 1;
        }
    e->sem = 1;
    struct span opt;
    while (next_piece(&rest, ';', &opt)) {
        unsigned long lease;
        if (eq(opt, "fair")) {
            e->fair = 1;
        } else if (opt.n > 6 && !memcmp(opt.p, "lease=", 6) &&
                   !parse_lease(trim(opt.p + 6, opt.n - 6), &lease)) {
            e->lease_ms = lease;
        } else {
            report(c, "entry '%.*s': a sem_open pattern takes fair and lease=MS only, not '%.*s'",
                   (int)ent.n, ent.p, (int)opt.n, opt.p);
            return 1;
        }
    }
    e->symbol = dup_span(pattern);
    return e->symbol ? 0 : -1;
}

/* Parse one entry into e.  Returns 0, 1 (reported error) or -1 (ENOMEM). */
static int parse_entry(struct ctx *c, struct span ent, struct rm_shim_entry *e)
{
    memset(e, 0, sizeof *e);
    struct span rest = ent, head;
    next_piece(&rest, ';', &head); /* head: [object:]symbol[=name], or /pattern */
    if (head.n && head.p[0] == '/') return parse_sem_entry(c, ent, head, rest, e);
    struct span sym = head, name = { NULL, 0 };
    const char *eqp = memchr(head.p, '=', head.n);
    if (eqp) {
        sym = trim(head.p, (size_t)(eqp - head.p));
        name = trim(eqp + 1, head.n - (size_t)(eqp - head.p) - 1);
        if (name.n == 0) {
            report(c, "entry '%.*s': empty lock name after '='", (int)ent.n, ent.p);
            return 1;
        }
    }
    struct span obj = { NULL, 0 };
    const char *colon = memchr(sym.p, ':', sym.n);
    if (colon) {
        obj = trim(sym.p, (size_t)(colon - sym.p));
        sym = trim(colon + 1, sym.n - (size_t)(colon - sym.p) - 1);
        if (!valid_object(obj)) {
            report(c, "entry '%.*s': '%.*s' is not a shared object's file name", (int)ent.n, ent.p,
                   (int)obj.n, obj.p);
            return 1;
        }
    }
    if (!valid_symbol(sym)) {
        report(c, "entry '%.*s': '%.*s' is not a symbol name", (int)ent.n, ent.p, (int)sym.n, sym.p);
        return 1;
    }
    struct span opt;
    while (next_piece(&rest, ';', &opt)) {
        unsigned long lease;
        if (eq(opt, "fair")) {
            e->fair = 1;
        } else if (eq(opt, "robust")) {
            e->robust = 1;
        } else if (eq(opt, "cache")) {
            e->cache = 1;
        } else if (eq(opt, "cond")) {
            e->cond = 1;
        } else if (eq(opt, "rwlock")) {
            e->rwlock = 1;
        } else if (eq(opt, "once")) {
            e->once = 1;
        } else if (opt.n > 6 && !memcmp(opt.p, "lease=", 6)) {
            if (parse_lease(trim(opt.p + 6, opt.n - 6), &lease)) {
                report(c, "entry '%.*s': lease must be a number of milliseconds in [1, %lu]",
                       (int)ent.n, ent.p, LEASE_MAX);
                return 1;
            }
            e->lease_ms = lease;
        } else {
            report(c, "entry '%.*s': unknown option '%.*s' (fair, robust, cache, lease=MS, cond, rwlock, once)",
                   (int)ent.n, ent.p, (int)opt.n, opt.p);
            return 1;
        }
    }
    if (e->cache && e->lease_ms) {
        report(c, "entry '%.*s': cache needs a renewed lease (no lease=)", (int)ent.n, ent.p);
        return 1;
    }
    if (e->rwlock && (e->fair || e->robust || e->cache || e->cond)) {
        report(c, "entry '%.*s': a read-write lock (rwlock) takes no other option but lease=",
               (int)ent.n, ent.p);
        return 1;
    }
    if (e->once && (e->fair || e->robust || e->cache || e->lease_ms || e->cond || e->rwlock)) {
        report(c, "entry '%.*s': a once control (once) takes no other option", (int)ent.n, ent.p);
        return 1;
    }
    if (e->cond && (e->fair || e->robust || e->cache || e->lease_ms)) {
        report(c, "entry '%.*s': a condition variable (cond) takes no other option", (int)ent.n,
               ent.p);
        return 1;
    }
    int bad = 0;
    e->symbol = dup_span(sym);
    e->object = obj.p ? dup_span(obj) : NULL;
    e->name = name.p ? decode_name(name, &bad) : dup_span(sym);
    if (bad) {
        report(c, "entry '%.*s': bad %%XX escape in the lock name", (int)ent.n, ent.p);
        free(e->symbol);
        free(e->object);
        return 1;
    }
    if (!e->symbol || !e->name || (obj.p && !e->object)) {
        free(e->symbol);
        free(e->object);
        free(e->name);
        return -1;
    }
    return 0;
}

static int same_symbol(const struct rm_shim_entry *a, const struct rm_shim_entry *b)
{
    if (strcmp(a->symbol, b->symbol)) return 0;
    if (!a->object || !b->object) return !a->object && !b->object;
    return !strcmp(a->object, b->object);
}

static int add_entry(struct rm_shim_config *out, struct rm_shim_entry *e)
{
    struct rm_shim_entry *v = realloc(out->v, (out->n + 1) * sizeof *v);
    if (!v) return -1;
    out->v = v;
    v[out->n++] = *e;
    return 0;
}

static void entry_free(struct rm_shim_entry *e)
{
    free(e->object);
    free(e->symbol);
    free(e->name);
}

int rm_shim_config_parse(const char *spec, const char *exe, const char *argv0,
                         struct rm_shim_config *out, rm_shim_errfn err, void *arg)
{
    struct ctx c = { err, arg, 0 };
    out->v = NULL;
    out->n = 0;
    if (!spec) return 0;
    struct span all = { spec, strlen(spec) }, sec;
    while (next_piece(&all, '|', &sec)) {
        if (sec.n == 0) continue;
        const char *colon = memchr(sec.p, ':', sec.n);
        if (!colon) {
            report(&c, "section '%.*s' has no ':' after its program names", (int)sec.n, sec.p);
            continue;
        }
        struct span progs = trim(sec.p, (size_t)(colon - sec.p)), pat;
        struct span ents = { colon + 1, sec.n - (size_t)(colon - sec.p) - 1 }, ent;
        int applies = 0;
        if (progs.n == 0) {
            report(&c, "section '%.*s' names no program", (int)sec.n, sec.p);
            continue;
        }
        while (next_piece(&progs, ',', &pat))
            if (program_matches(pat, exe, argv0)) applies = 1;
        if (!applies) continue;
        while (next_piece(&ents, ',', &ent)) {
            if (ent.n == 0) continue;
            struct rm_shim_entry e;
            int r = parse_entry(&c, ent, &e);
            if (r < 0) goto nomem;
            if (r > 0) continue;
            int dup = 0;
            for (size_t i = 0; i < out->n; i++) dup |= same_symbol(&out->v[i], &e);
            if (dup) {
                report(&c, "entry '%.*s': %s%s%s is listed twice", (int)ent.n, ent.p,
                       e.object ? e.object : "", e.object ? ":" : "", e.symbol);
                entry_free(&e);
                continue;
            }
            if (add_entry(out, &e)) {
                entry_free(&e);
                goto nomem;
            }
        }
    }
    return c.errors;
nomem:
    rm_shim_config_free(out);
    return -1;
}

void rm_shim_config_free(struct rm_shim_config *c)
{
    for (size_t i = 0; i < c->n; i++) entry_free(&c->v[i]);
    free(c->v);
    c->v = NULL;
    c->n = 0;
}
