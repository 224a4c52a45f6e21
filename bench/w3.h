/* w3.h -- W3's record of every acquisition, and what is read from it. */
#ifndef BENCH_W3_H
#define BENCH_W3_H

#include <stddef.h>
#include <stdint.h>

/* One acquisition, at index = the counter value its owner read inside the
 * critical section (so in acquisition order).  Times are now_ns(). */
struct w3_rec {
    int64_t call; /* rmutex_lock called */
    int64_t acq;  /* rmutex_lock returned */
    int64_t unl;  /* rmutex_unlock called */
    int64_t rel;  /* rmutex_unlock returned */
    int32_t who;  /* thread number + 1; 0: never written */
    int32_t pad;
};

struct w3_result {
    long n;                /* acquisitions in the window */
    double rate;           /* per second */
    double p50_us, p99_us; /* hand-off: unlock returns -> next owner's lock returns */
    double p50_call_us;    /* hand-off from unlock called */
    double p50_xproc_us;   /* the same, to a thread of another process only (NAN: none) */
    double gap_ms;         /* longest time without an acquisition */
    double fifo;           /* acquisitions that overtook an earlier caller by > slack */
    double min_share, max_share; /* per-thread acquisitions / mean */
    double *handoff_us;    /* sorted, malloc'ed; nh of them */
    size_t nh;
};

/* Read records [0, n) of nthreads threads, per_proc to a process (thread
 * numbers in order; 0: unknown), over the window [t0, t1]. */
void w3_analyze(const struct w3_rec *rec, size_t n, int nthreads, int per_proc, int64_t t0,
                int64_t t1, double slack_ns, struct w3_result *out);

/* The hand-off to another process, one holder and one waiter, non-fair and
 * fair, against the pub/sub floor measured before it (w3_handoff.c). */
void w3_handoff_run(const double *floor_us);

#endif
