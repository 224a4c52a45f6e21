/* cmdstats.c -- how long Redis spent in EVALSHA, by INFO commandstats.
 *
 * INFO commandstats keeps, per command name, the number of calls and the
 * microseconds spent in them (measured around the call inside Redis, so no
 * network and no queueing).  Reading the totals before and after a stretch
 * of calls gives their mean Redis-side time without CONFIG RESETSTAT.  It
 * lumps every script called by EVALSHA together, so a measurement must
 * make only the calls it means to time with EVALSHA (helpers use EVAL,
 * which is counted apart).  SLOWLOG with threshold 0 would tell scripts
 * apart, but Redis 7 also logs every command a script runs, and building
 * those entries makes a script call about a third slower. */
#include "cmdstats.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int command_totals(redisContext *c, const char *name, double *calls, double *usec)
{
    redisReply *r = rcmd(c, "INFO commandstats");
    if (!r) return -1;
    char key[64];
    snprintf(key, sizeof key, "cmdstat_%s:", name);
    *calls = *usec = 0;
    const char *p = strstr(r->str, key);
    if (p) {
        const char *a = strstr(p, "calls="), *b = strstr(p, "usec=");
        if (a) *calls = strtod(a + 6, NULL);
        if (b) *usec = strtod(b + 5, NULL);
    }
    freeReplyObject(r);
    return 0;
}

int evalsha_totals(redisContext *c, double *calls, double *usec)
{
    return command_totals(c, "evalsha", calls, usec);
}
