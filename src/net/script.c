/* script.c -- calling the embedded Lua scripts.
 *
 * Every script is called by EVALSHA with the SHA1 computed at build time,
 * so the common case sends a 40-byte digest, never the body.  When Redis
 * answers NOSCRIPT nothing ran, so the same call is repeated once as EVAL
 * with the body, which also puts the script back in the server's cache. */
#include "script.h"
#include "conn.h"
#include "internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#define STACK_ARGS 24

void rm_script_append(struct rm_conn *c, int id, int nkeys, int argc, const char *const *argv,
                      const size_t *lens, int eval)
{
    const struct rm_script *s = &rm_scripts[id];
    const char *sv[STACK_ARGS], **v = sv;
    size_t sl[STACK_ARGS], *l = sl;
    char nk[RM_CONN_UINT];

    if (argc + 3 > STACK_ARGS) {
        v = malloc(sizeof *v * (size_t)(argc + 3));
        l = malloc(sizeof *l * (size_t)(argc + 3));
        if (!v || !l) {
            free(v == sv ? NULL : v);
            free(l == sl ? NULL : l);
            c->broken = 1;
            return;
        }
    }
    v[0] = eval ? "EVAL" : "EVALSHA";
    l[0] = strlen(v[0]);
    v[1] = eval ? s->body : s->sha;
    l[1] = eval ? s->len : 40;
    l[2] = rm_conn_uint(nk, (unsigned)nkeys);
    v[2] = nk;
    memcpy(v + 3, argv, sizeof *v * (size_t)argc);
    memcpy(l + 3, lens, sizeof *l * (size_t)argc);
    rm_conn_append(c, argc + 3, v, l);
    if (v != sv) {
        free(v);
        free(l);
    }
}

/* An ACL refused the call of script id, or a call inside it: name the
 * user, and for a call inside, the command on the script's line (Redis
 * names only the line: "... @user_script:195."). */
static void name_refused_call(const struct rm_conn *c, int id, const redisReply *reply)
{
    const char *at = memmem(reply->str, reply->len, "@user_script:", 13);
    const char *p = rm_scripts[id].body, *end = p + rm_scripts[id].len, *cmd = NULL, *q = NULL;
    long line = at ? strtol(at + 13, NULL, 10) : 0;
    for (long n = 1; at && n < line && p < end; p++)
        if (*p == '\n') n++;
    const char *eol = at ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    const char *call = at ? memmem(p, (size_t)((eol ? eol : end) - p), "call('", 6) : NULL;
    if (call) {
        cmd = call + 6;
        q = memchr(cmd, '\'', (size_t)((eol ? eol : end) - cmd));
    }
    if (q)
        rm_detail("Redis refused %.*s to user '%s' (ACL) in %s.lua line %ld: %.*s", (int)(q - cmd),
                  cmd, c->user, rm_scripts[id].name, line, (int)reply->len, reply->str);
    else
        rm_detail("Redis refused user '%s': %.*s", c->user, (int)reply->len, reply->str);
}

int rm_script_call(struct rm_conn *c, int id, int nkeys, int argc, const char *const *argv,
                   const size_t *lens, int asking, rm_nsec deadline, redisReply **out)
{
    static const char *ask[] = { "ASKING" };
    static const size_t asklen[] = { 6 };
    for (int eval = 0; eval < 2; eval++) {
        redisReply *reply;
        /* ASKING holds for one command, even one answered NOSCRIPT. */
        if (asking) rm_conn_append(c, 1, ask, asklen);
        rm_script_append(c, id, nkeys, argc, argv, lens, eval);
        int r = rm_conn_flush(c, deadline);
        if (!r && asking && !(r = rm_conn_read(c, deadline, &reply))) freeReplyObject(reply);
        if (!r) r = rm_conn_read(c, deadline, &reply);
        if (r) return r;
        if (!eval && rm_conn_reply_is_noscript(reply)) {
            freeReplyObject(reply);
            RM_COUNT(script_loads);
            rm_log("script %s not cached by the server; sending its body", rm_scripts[id].name);
            continue;
        }
        if (reply->type == REDIS_REPLY_ERROR &&
            ((reply->len > 6 && !memcmp(reply->str, "MOVED ", 6)) ||
             (reply->len > 4 && !memcmp(reply->str, "ASK ", 4)))) {
            *out = reply;
            return RM_E_REDIRECT;
        }
        if ((r = rm_conn_reply_status(reply))) {
            if (r == EACCES) name_refused_call(c, id, reply);
            freeReplyObject(reply);
            return r;
        }
        *out = reply;
        return 0;
    }
    return EIO; /* NOSCRIPT after EVAL: cannot happen */
}
