/* script.h -- the Lua scripts (the .lua files in src/lua, embedded at build time) and
 * how they are called. */
#ifndef RM_SCRIPT_H
#define RM_SCRIPT_H

#include <stddef.h>

#include "clock.h"

struct rm_conn;
struct redisReply;

struct rm_script {
    const char *name;
    const char *body;
    size_t len;
    const char *sha; /* SHA1 of body, as EVALSHA wants it */
};

/* One entry per src/lua/NAME.lua, sorted by name as the build lists them. */
enum {
    RM_SCRIPT_ACQUIRE,
    RM_SCRIPT_ANNOUNCE,
    RM_SCRIPT_BARRIER,
    RM_SCRIPT_COND,
    RM_SCRIPT_FAIR,
    RM_SCRIPT_FENCE,
    RM_SCRIPT_FORCE_UNLOCK,
    RM_SCRIPT_INSPECT,
    RM_SCRIPT_ONCE,
    RM_SCRIPT_PARK,
    RM_SCRIPT_RELEASE,
    RM_SCRIPT_RENEW,
    RM_SCRIPT_RWLOCK,
    RM_SCRIPT_SEM,
    RM_SCRIPT_WHOIS,
    RM_SCRIPT_COUNT
};

extern const struct rm_script rm_scripts[RM_SCRIPT_COUNT];

/* Queue a call of script id: EVALSHA (or EVAL with the body when eval is
 * set) with argv[0..nkeys) as KEYS and argv[nkeys..argc) as ARGV. */
void rm_script_append(struct rm_conn *c, int id, int nkeys, int argc, const char *const *argv,
                      const size_t *lens, int eval);

/* Call script id and read its reply, after ASKING when asking is set (a
 * cluster's ASK redirection).  After NOSCRIPT (the server lost its script
 * cache: restart, SCRIPT FLUSH, failover) the script is sent once more
 * with its body.  Returns 0 and *out (never an error reply);
 * RM_E_REDIRECT and *out, the MOVED or ASK error reply; a public errno or
 * RM_E_TRANSIENT for another error reply; RM_E_UNSENT or RM_E_LOST. */
int rm_script_call(struct rm_conn *c, int id, int nkeys, int argc, const char *const *argv,
                   const size_t *lens, int asking, rm_nsec deadline, struct redisReply **out);

#endif
