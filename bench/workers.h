/* workers.h -- forked worker processes that start together (W3, W4's
 * crowds): the parent waits until they are ready, lets them run for a
 * time, then stops and reaps them. */
#ifndef BENCH_WORKERS_H
#define BENCH_WORKERS_H

#include <stdint.h>
#include <sys/types.h>

/* In memory the workers share with the parent.  The workers count
 * themselves ready, start at go, end at stop; any sets failed. */
struct workers {
    _Atomic int ready, go, stop, failed;
};

/* Wait (a minute at most) until f->ready reaches ready_n, set go, let
 * seconds pass (less if one fails), set stop, and wait for the processes
 * pid[0..procs) to exit, each within stop_seconds (else killed).  The run's
 * window in *t0, *t1 (now_ns).  0, or -1 when one failed, exited badly or
 * had to be killed. */
int workers_run(const char *id, struct workers *f, int ready_n, const pid_t *pid, int procs,
                double seconds, double stop_seconds, int64_t *t0, int64_t *t1);

#endif
