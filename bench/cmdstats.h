/* cmdstats.h -- Redis-side time of EVALSHA calls, from INFO commandstats. */
#ifndef BENCH_CMDSTATS_H
#define BENCH_CMDSTATS_H

#include <hiredis/hiredis.h>

/* The server's running totals for EVALSHA: calls and microseconds.
 * 0, or -1 when INFO failed. */
int evalsha_totals(redisContext *c, double *calls, double *usec);

#endif
