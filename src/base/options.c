/* options.c -- the library's options: the settings, a URL's query, and the
 * setters.
 *
 * options.def lists every option once; this file and internal.h make from
 * it the settings (struct rm_settings and its defaults), the URL option
 * table, what a URL's options do to the settings, and the setters' range
 * checks, so that a new option is one line there (and one row of
 * docs/configuration.md's table, which tests/options_test.cc compares with
 * it).
 *
 * The settings are atomics, read anywhere at any time (RM_SETTING) and
 * written by a setter or by a URL that was good as a whole: rm_config_parse
 * parses all of a URL into a struct rm_options first and applies it only
 * then.  An option a URL does not name keeps its current value: the
 * default, or what an earlier URL or setter gave it, so settings made with
 * rmutex_set_*() before the first call survive the lazy parse of
 * RMUTEX_URL. */
#include "options.h"
#include "internal.h"
#include "url.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rm_settings rm_settings = {
#define RM_OPTION(name, field, type, min, max, def, unit, text) .field = def,
#include "options.def"
};

/* The URL option table, in RM_OPT_ order. */
static const struct {
    const char *name;
    unsigned long min, max, def;
    size_t text; /* a string: where it goes in struct rm_options (never 0: value[] is first) */
} options[RM_OPT_COUNT] = {
#define RM_OPTION(name, field, type, min, max, def, unit, text) { #name, min, max, def, 0 },
#define RM_URL_OPTION(name, min, max, def, unit, text) { #name, min, max, def, 0 },
#define RM_URL_TEXT(name, text) { #name, 0, 0, 0, offsetof(struct rm_options, name) },
#include "options.def"
};

/* The longest lease is one number: the lease options' max, the attributes'. */
enum {
#define RM_OPTION(name, field, type, min, max, ...) MAX_##name = max,
#include "options.def"
};
_Static_assert(MAX_lease == RM_LEASE_MAX && MAX_waiter_lease == RM_LEASE_MAX,
               "options.def's lease range and RM_LEASE_MAX must agree");

static int in_range(int id, unsigned long v)
{
    return v >= options[id].min && v <= options[id].max;
}

/* v into the setting id (no check: replicas may be RM_REPLICAS_AUTO). */
static void store(int id, unsigned long v)
{
    switch (id) {
#define RM_OPTION(name, field, type, ...) \
    case RM_OPT_##name: atomic_store(&rm_settings.field, (type)v); break;
#include "options.def"
    default: break; /* a URL's own option: not a setting */
    }
}

void rm_options_init(struct rm_options *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < RM_OPT_COUNT; i++) o->value[i] = options[i].def;
}

static char **text_of(struct rm_options *o, int id)
{
    return options[id].text ? (char **)((char *)o + options[id].text) : NULL;
}

static void text_free(char **s)
{
    if (*s) explicit_bzero(*s, strlen(*s));
    free(*s);
    *s = NULL;
}

/* One option's value, v[0..n), into o. */
static int parse_value(int id, const char *v, size_t n, struct rm_options *o)
{
    char **to = text_of(o, id);
    if (to) {
        int bad = 0;
        text_free(to); /* the last one counts */
        if (!(*to = rm_url_decode(v, n, &bad))) {
            rm_detail(bad ? "bad percent-escape in URL option %s" : "out of memory",
                      options[id].name);
            return bad ? EINVAL : ENOMEM;
        }
    } else if (id == RM_OPT_replicas && n == 4 && !memcmp(v, "auto", 4)) {
        o->value[id] = RM_REPLICAS_AUTO; /* the one word a number takes */
    } else if (rm_url_number(v, n, options[id].min, options[id].max, &o->value[id])) {
        rm_detail("URL option %s must be a number in [%lu, %lu]", options[id].name,
                  options[id].min, options[id].max);
        return EINVAL;
    }
    o->set[id] = 1;
    return 0;
}

int rm_options_parse(const char *q, struct rm_options *o)
{
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        if (!eq) { rm_detail("URL option without a value"); return EINVAL; }
        size_t klen = (size_t)(eq - q);
        int id;
        for (id = 0; id < RM_OPT_COUNT; id++)
            if (strlen(options[id].name) == klen && !memcmp(options[id].name, q, klen)) break;
        if (id == RM_OPT_COUNT) {
            rm_detail("unknown URL option '%.*s'", (int)(klen > 40 ? 40 : klen), q);
            return EINVAL;
        }
        int r = parse_value(id, eq + 1, len - klen - 1, o);
        if (r) return r;
        q += len + (amp ? 1 : 0);
    }
    return 0;
}

void rm_options_apply(const struct rm_options *o)
{
    for (int id = 0; id < RM_OPT_COUNT; id++)
        if (o->set[id]) store(id, o->value[id]);
}

void rm_options_free(struct rm_options *o)
{
    for (int id = 0; id < RM_OPT_COUNT; id++) {
        char **s = text_of(o, id);
        if (s) text_free(s);
    }
}

/* ---- public setters: the options' ranges, as a URL's ---- */

static int set(int id, unsigned long v)
{
    if (!in_range(id, v)) return EINVAL;
    store(id, v);
    return 0;
}

RMUTEX_API int rmutex_set_pool_size(unsigned n) { return set(RM_OPT_pool, n); }

RMUTEX_API int rmutex_set_default_lease(unsigned long lease_ms) { return set(RM_OPT_lease, lease_ms); }

RMUTEX_API int rmutex_set_min_replicas(unsigned n) { return set(RM_OPT_min_replicas, n); }

/* Two options at once, and the special case of options.def: auto is not in
 * replicas' range, and a timeout is neither checked nor set when n is 0. */
RMUTEX_API int rmutex_set_wait_replicas(unsigned n, unsigned long timeout_ms)
{
    if ((n != RM_REPLICAS_AUTO && !in_range(RM_OPT_replicas, n)) ||
        (n && !in_range(RM_OPT_wait_timeout, timeout_ms)))
        return EINVAL;
    store(RM_OPT_replicas, n);
    if (n) store(RM_OPT_wait_timeout, timeout_ms);
    return 0;
}
