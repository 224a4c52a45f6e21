/* w3_analyze.c -- W3's figures, read off the acquisition records.
 *
 * Hand-off latency: for consecutive acquisitions i, i+1 where the next
 * owner had called rmutex_lock before the previous owner's rmutex_unlock
 * returned (so it was waiting: a real hand-off, not a lock found free),
 * acq[i+1] - rel[i].  It can be negative: the grant message may reach the
 * next owner before the reply reaches the releaser.  Also from the unlock
 * call, acq[i+1] - unl[i], which always includes the release's trip; and
 * that one again for the hand-offs to a thread of another process only
 * (release -> the next process holding: what pub/sub must carry, against
 * W3's floor, a raw PUBLISH -> a subscriber process read it).
 *
 * Longest gap: the longest time in the window without an acquisition.
 *
 * FIFO violations (meaningful for the fair lock): acquisition k by thread X
 * is a violation when some other thread Y, whose pending call started more
 * than the slack before X's call, is still waiting (its next acquisition
 * comes after k).  The slack absorbs what happens between taking the time
 * and the enqueue reaching Redis (scheduling on a loaded machine); a
 * waiter dropped from the queue and re-enqueued at the tail waits far
 * longer than that and is caught.
 *
 * Per-thread shares: each thread's acquisitions over the mean. */
#include "w3.h"
#include "stat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void w3_analyze(const struct w3_rec *rec, size_t n, int nthreads, int per_proc, int64_t t0,
                int64_t t1, double slack_ns, struct w3_result *out)
{
    memset(out, 0, sizeof *out);
    /* The window: records [lo, hi) with t0 <= acq <= t1, all written. */
    size_t lo = 0, hi = 0;
    while (lo < n && rec[lo].who && rec[lo].acq < t0) lo++;
    hi = lo;
    while (hi < n && rec[hi].who && rec[hi].acq <= t1) hi++;
    out->n = (long)(hi - lo);
    out->rate = (double)out->n / ((double)(t1 - t0) / 1e9);

    double *h = malloc(sizeof *h * (hi - lo + 1)), *hc = malloc(sizeof *hc * (hi - lo + 1));
    double *hx = malloc(sizeof *hx * (hi - lo + 1));
    size_t nh = 0, nx = 0;
    int64_t gap = hi > lo ? rec[lo].acq - t0 : t1 - t0;
    for (size_t i = lo; i + 1 < hi; i++) {
        int64_t g = rec[i + 1].acq - rec[i].acq;
        if (g > gap) gap = g;
        if (rec[i + 1].call < rec[i].rel) {
            h[nh] = (double)(rec[i + 1].acq - rec[i].rel) / 1e3;
            hc[nh++] = (double)(rec[i + 1].acq - rec[i].unl) / 1e3;
            if (per_proc > 0 && (rec[i + 1].who - 1) / per_proc != (rec[i].who - 1) / per_proc)
                hx[nx++] = (double)(rec[i + 1].acq - rec[i].unl) / 1e3;
        }
    }
    if (hi > lo && t1 - rec[hi - 1].acq > gap) gap = t1 - rec[hi - 1].acq;
    out->gap_ms = (double)gap / 1e6;
    sort_doubles(h, nh);
    sort_doubles(hc, nh);
    out->p50_us = quantile_sorted(h, nh, 0.5);
    out->p99_us = quantile_sorted(h, nh, 0.99);
    out->p50_call_us = quantile_sorted(hc, nh, 0.5);
    sort_doubles(hx, nx);
    out->p50_xproc_us = nx ? quantile_sorted(hx, nx, 0.5) : NAN;
    free(hx);
    out->handoff_us = h;
    out->nh = nh;
    free(hc);

    /* Per-thread lists of acquisition indices (in the window), then FIFO. */
    size_t *count = calloc((size_t)nthreads, sizeof *count);
    size_t *start = calloc((size_t)nthreads + 1, sizeof *start);
    size_t *cursor = calloc((size_t)nthreads, sizeof *cursor);
    size_t *idx = malloc(sizeof *idx * (hi - lo + 1));
    for (size_t i = lo; i < hi; i++) count[rec[i].who - 1]++;
    for (int t = 0; t < nthreads; t++) start[t + 1] = start[t] + count[t];
    for (int t = 0; t < nthreads; t++) cursor[t] = start[t];
    for (size_t i = lo; i < hi; i++) idx[cursor[rec[i].who - 1]++] = i;
    for (int t = 0; t < nthreads; t++) cursor[t] = start[t];
    long fifo = 0;
    for (size_t k = lo; k < hi; k++) {
        int x = rec[k].who - 1;
        for (int y = 0; y < nthreads; y++) {
            if (y == x || cursor[y] >= start[y + 1]) continue;
            const struct w3_rec *next = &rec[idx[cursor[y]]];
            if ((double)next->call + slack_ns < (double)rec[k].call) {
                fifo++;
                break;
            }
        }
        cursor[x]++;
    }
    out->fifo = (double)fifo;
    double mean = (double)out->n / nthreads, mn = INFINITY, mx = 0;
    for (int t = 0; t < nthreads; t++) {
        mn = fmin(mn, (double)count[t]);
        mx = fmax(mx, (double)count[t]);
    }
    out->min_share = mean > 0 ? mn / mean : 0;
    out->max_share = mean > 0 ? mx / mean : 0;
    free(count);
    free(start);
    free(cursor);
    free(idx);
}
