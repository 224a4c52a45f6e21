/* cmdstats.h -- Redis-side time of commands, from INFO commandstats. */
#ifndef BENCH_CMDSTATS_H
#define BENCH_CMDSTATS_H

#include <hiredis/hiredis.h>

/* The server's running totals for EVALSHA: calls and microseconds.
 * 0, or -1 when INFO failed. */
int evalsha_totals(redisContext *c, double *calls, double *usec);

/* The same for any command by its commandstats name ("del").  Redis 7
 * counts the commands a script runs under their own names too, so these
 * totals mix a client's own calls of the command with the scripts'. */
int command_totals(redisContext *c, const char *name, double *calls, double *usec);

#endif
