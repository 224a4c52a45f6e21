/* w13_rwlock.c -- W13: read-write locks (rrwlock_*), against the mutex pair
 * and the raw round trip of the same run.
 *
 *   1. Uncontended pairs, one thread: rdlock+unlock and wrlock+unlock
 *      pairs/s beside the non-fair mutex's lock+unlock (W1's measurement),
 *      2 s each per repetition, after a raw hiredis EVALSHA loop;
 *      round trips per pair (rmutex_stats) and the Redis time per pair
 *      (INFO commandstats: the EVALSHA time of the stretch / its pairs).
 *   2. Redis time per read pair while N other readers hold a read of the
 *      same name, N = 1, 100, 10 000: one thread of this process does read
 *      pairs; the N are real read holds, taken through the library by the
 *      threads of forked processes (w13_readers.c) -- 1 x 1, 10 x 10 and
 *      200 x 50 processes x threads, so Redis holds 1, 10 and 200 reader
 *      entries (one per process: the readers zset's member, the lock
 *      hash's anchor, a holds hash of one field per thread).  Their holds
 *      have a fixed lease (10 minutes) so that no renewal lands among the
 *      timed calls; the three crowds hold three names at once, 3 s of
 *      pairs each per repetition.  The EVALSHA
 *      calls of each stretch are checked against 2 per pair (a stray
 *      call would be counted in).  The ratio 10 000 / 1 per repetition
 *      (target <= 2: cost flat in the readers).
 *   3. Hand-off latency (w13_handoff.c).
 *   4. Renewals of 10 000 read holds (lease=6000, renewed by the
 *      watchdogs), held by one process of 10 000 threads and by 200
 *      processes of 50: over two lease periods of holding, the renewal
 *      script calls of all the processes (rmutex_stats), the renewals of
 *      the name's reader entries the server made (keyspace notifications
 *      on the readers zset: one ZADD per renewed process entry, counted
 *      by the server, no MONITOR) and every script call the server ran
 *      (the renewals and the registry's announcements: nothing else
 *      runs).  The entries Redis holds, and how many are past their lease
 *      (lost), are printed after the start.  (With lease=2000, the 200
 *      processes of 50 lost most of their holds while starting on this
 *      2-core machine -- 177 of 200 entries lapsed -- and none with 6000;
 *      10 000 threads of one process, or 200 of one, lost none.)
 *      Expected: one renewal per lease / 3 per name per process, whatever
 *      the number of its reading threads.
 * Parts 1 and 2 take their subjects in rounds (rounds.c: five short
 * stretches each, interleaved, the median of each): Redis time by
 * commandstats is wall time inside Redis, and on a shared 2-core machine
 * a burst of other load inflates whatever stretch it falls on. */
#include "bench.h"
#include "clock.h"
#include "cmdstats.h"
#include "report.h"
#include "rounds.h"
#include "server.h"
#include "w13.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CROWD_LEASE_MS 600000 /* part 2: no renewal while measured */
#define RENEW_LEASE_MS 6000   /* part 4 (2000 loses holds in the start's burst here) */

int rw_pairs(rrwlock_t *l, int writer, long n, double seconds, double *rate)
{
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9), t;
    long k = 0;
    do {
        int r = writer ? rrwlock_wrlock(l) : rrwlock_rdlock(l);
        if (r || (r = rrwlock_unlock(l))) {
            fprintf(stderr, "bench W13: %s pair: %s (%s)\n", writer ? "write" : "read", strerror(r),
                    rmutex_detail());
            return -1;
        }
        k++;
    } while ((t = now_ns()) < until || k < n);
    if (rate) *rate = k / ((double)(t - t0) / 1e9);
    return 0;
}

/* ---- 1: uncontended pairs ---- */

enum { MUTEX, READ, WRITE, NKIND };
static const char *const kind_name[NKIND] = { "mutex (non-fair)", "read", "write" };

static int mutex_subject(void *m, double seconds, double *rate)
{
    return lock_pairs("W13", m, 0, seconds, rate);
}

struct rw_subject {
    rrwlock_t *l;
    int writer;
};

static int rw_subject(void *arg, double seconds, double *rate)
{
    struct rw_subject *x = arg;
    return rw_pairs(x->l, x->writer, 0, seconds, rate);
}

static double mutex_redis_us; /* the mutex pair's Redis time, for part 2's rows */

static void pairs_part(void)
{
    double seconds = opt.quick ? 0.5 : 2;
    char mname[128], rname[128];
    lock_name(mname, sizeof mname, "w13:mutex");
    lock_name(rname, sizeof rname, "w13:rw");
    rmutex_t m;
    rrwlock_t l;
    redisContext *c = server_connect();
    int ok = c && !bench_configure("") && !rmutex_init(&m, mname, NULL);
    if (ok && rrwlock_init(&l, rname, NULL)) {
        rmutex_destroy(&m);
        ok = 0;
    }
    int made = ok;
    ok = ok && !lock_pairs("W13", &m, 200, 0.2, NULL) && !rw_pairs(&l, 0, 200, 0.2, NULL) &&
         !rw_pairs(&l, 1, 200, 0.2, NULL);
    static const char *const pair[NKIND] = { "lock+unlock", "lock+unlock", "lock+unlock" };
    struct rw_subject rd = { &l, 0 }, wr = { &l, 1 };
    const struct subject subj[NKIND] = { { mutex_subject, &m }, { rw_subject, &rd }, { rw_subject, &wr } };
    rounds_report("W13", ok, c, NKIND, subj, kind_name, pair, seconds, &mutex_redis_us);
    if (made) {
        rmutex_destroy(&m);
        rrwlock_destroy(&l);
    }
    if (c) redisFree(c);
}

/* ---- 2: Redis time per read pair against the readers holding ---- */

static const struct {
    int readers, procs, threads;
} crowds[] = { { 1, 1, 1 }, { 100, 10, 10 }, { 10000, 200, 50 } };
#define NCROWDS 3

/* The reader entries Redis holds for name: members of its readers zset,
 * and the fields of its lock hash. */
static void entries(redisContext *c, const char *name, long long *zcard, long long *hlen)
{
    *zcard = rcmd_int(c, "ZCARD rmutex_rw_readers:{%s}", name);
    *hlen = rcmd_int(c, "HLEN %s", name);
}

static void readers_part(void)
{
    struct sample us[NCROWDS], rate[NCROWDS], ratio[NCROWDS];
    memset(us, 0, sizeof us);
    memset(rate, 0, sizeof rate);
    memset(ratio, 0, sizeof ratio);
    double seconds = opt.quick ? 1 : 3;
    char name[NCROWDS][128], note[NCROWDS][96];
    struct crowd *crowd[NCROWDS] = { 0 };
    rrwlock_t l[NCROWDS];
    int made = 0;
    redisContext *c = server_connect();
    int ok = c && !bench_configure("");
    for (int k = 0; ok && k < NCROWDS; k++) {
        char what[64];
        snprintf(what, sizeof what, "w13:readers:%d", crowds[k].readers);
        lock_name(name[k], sizeof name[k], what);
        int64_t t0 = now_ns();
        if (!(crowd[k] = crowd_start(name[k], crowds[k].procs, crowds[k].threads, CROWD_LEASE_MS))) {
            ok = 0;
            break;
        }
        long long z, h;
        entries(c, name[k], &z, &h);
        snprintf(note[k], sizeof note[k], "%d procs × %d threads; Redis: %lld reader entries, %lld hash fields",
                 crowds[k].procs, crowds[k].threads, z, h);
        printf("  W13 readers: %d holding (%s), in %.1f s\n", crowds[k].readers, note[k],
               (double)(now_ns() - t0) / 1e9);
        if (rrwlock_init(&l[k], name[k], NULL) || rw_pairs(&l[k], 0, 200, 0.2, NULL)) ok = 0;
        else made++;
    }
    for (int i = 0; ok && i < opt.reps; i++) {
        struct stretch s[NCROWDS];
        struct rw_subject rd[NCROWDS] = { { &l[0], 0 }, { &l[1], 0 }, { &l[2], 0 } };
        const struct subject subj[NCROWDS] = { { rw_subject, &rd[0] }, { rw_subject, &rd[1] },
                                               { rw_subject, &rd[2] } };
        if (!(ok = !rounds_measure(c, NCROWDS, subj, seconds, s))) break;
        printf("  W13 readers:");
        for (int k = 0; k < NCROWDS; k++) {
            sample_add(&us[k], s[k].redis_us);
            sample_add(&rate[k], s[k].rate);
            sample_add(&ratio[k], s[k].redis_us / s[0].redis_us);
            printf(" %d holding: %.1f us in Redis per read pair, %.0f pairs/s%s;", crowds[k].readers,
                   s[k].redis_us, s[k].rate, s[k].stray ? " (stray calls counted in)" : "");
        }
        printf("\n");
    }
    for (int k = 0; k < made; k++) rrwlock_destroy(&l[k]);
    for (int k = 0; k < NCROWDS; k++)
        if (crowd[k] && crowd_stop(crowd[k])) ok = 0;
    if (c) redisFree(c);
    char fig[96];
    for (int k = 0; k < NCROWDS; k++) {
        snprintf(fig, sizeof fig, "Redis time per read pair, %d other readers holding", crowds[k].readers);
        struct row *r = report_row("W13", fig, "µs", ok ? &us[k] : NULL);
        row_limit_ref(r, &mutex_redis_us, 1, "mutex pair");
        if (ok) snprintf(r->note, sizeof r->note, "%.95s", note[k]);
        else row_na(r, "error, see stderr");
        snprintf(fig, sizeof fig, "read pairs/s, %d other readers holding", crowds[k].readers);
        r = report_row("W13", fig, "pairs/s", ok ? &rate[k] : NULL);
        row_limit_ref(r, &lim.eval_rate, 0.5, "EVALSHA/2");
    }
    for (int k = 1; k < NCROWDS; k++) {
        snprintf(fig, sizeof fig, "Redis time per read pair, %d ÷ 1 readers, same rep", crowds[k].readers);
        struct row *r = report_row("W13", fig, "ratio", ok ? &ratio[k] : NULL);
        if (k == NCROWDS - 1) row_target(r, "≤ 2", ON_VALUE, J_LE, 2, 0);
    }
}

/* ---- 4: renewals of 10 000 read holds ---- */

static const struct {
    int procs, threads;
} layouts[] = { { 1, 10000 }, { 200, 50 } };
#define NLAYOUTS 2

/* The server's renewals of name's reader entries over the next seconds:
 * ZADDs on its readers zset, by keyspace notification (notify-keyspace-events
 * must have K and z).  -1 when it cannot subscribe. */
static long zadds_for(const char *name, double seconds)
{
    redisContext *s = server_connect();
    if (!s) return -1;
    redisReply *r = redisCommand(s, "SUBSCRIBE __keyspace@%d__:rmutex_rw_readers:{%s}", srv.db, name);
    long n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY) {
        n = 0;
        int64_t until = now_ns() + (int64_t)(seconds * 1e9);
        for (int64_t left; (left = until - now_ns()) > 0;) {
            struct timeval tv = { (time_t)(left / 1000000000), (suseconds_t)(left % 1000000000 / 1000) };
            redisSetTimeout(s, tv);
            redisReply *m;
            if (redisGetReply(s, (void **)&m) != REDIS_OK) break; /* the timeout: done */
            if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->str &&
                !strcmp(m->element[2]->str, "zadd"))
                n++;
            freeReplyObject(m);
        }
    }
    if (r) freeReplyObject(r);
    redisFree(s);
    return n;
}

/* How many of name's reader entries have a lease past (server time): their
 * process lost its holds. */
static long long lapsed(redisContext *c, const char *name)
{
    redisReply *t = rcmd(c, "TIME");
    if (!t) return -1;
    long long now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    return rcmd_int(c, "ZCOUNT rmutex_rw_readers:{%s} -inf %lld", name, now);
}

/* The server's script calls so far: EVALSHA and EVAL (a script the server
 * did not have yet is sent once by EVAL, and a watchdog entry that got
 * NOSCRIPT keeps using EVAL). */
static int script_calls(redisContext *c, double *calls)
{
    double a, b, usec;
    if (evalsha_totals(c, &a, &usec) || command_totals(c, "eval", &b, &usec)) return -1;
    *calls = a + b;
    return 0;
}

static void renewals_part(void)
{
    char o[64];
    snprintf(o, sizeof o, "lease=%d", RENEW_LEASE_MS);
    redisContext *c = server_connect();
    int ok = c && !bench_configure(o);
    char old_events[64] = "";
    redisReply *r = ok ? rcmd(c, "CONFIG GET notify-keyspace-events") : NULL;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        snprintf(old_events, sizeof old_events, "%s", r->element[1]->str);
    if (r) freeReplyObject(r);
    int keyspace = ok && (r = rcmd(c, "CONFIG SET notify-keyspace-events Kz")) != NULL;
    if (keyspace) freeReplyObject(r);
    double period_s = RENEW_LEASE_MS / 1000.0, window_s = 2 * period_s;
    for (int k = 0; k < NLAYOUTS; k++) {
        int procs = layouts[k].procs, threads = layouts[k].threads, good = ok;
        struct sample calls = { .n = 0 }, entries_ren = { .n = 0 }, zadds = { .n = 0 },
                      evalsha = { .n = 0 }, lost = { .n = 0 };
        char what[64], name[128];
        snprintf(what, sizeof what, "w13:renew:%dx%d", procs, threads);
        lock_name(name, sizeof name, what);
        int64_t t0 = now_ns();
        struct crowd *cr = good ? crowd_start(name, procs, threads, 0) : NULL;
        if (!cr) good = 0;
        else
            printf("  W13 renewals: %d x %d readers holding in %.1f s\n", procs, threads,
                   (double)(now_ns() - t0) / 1e9);
        if (good) sleep_ns((int64_t)(period_s * 1e9)); /* past the start's burst */
        if (good) {
            long long z, h, past = lapsed(c, name);
            entries(c, name, &z, &h);
            printf("  W13 renewals: Redis holds %lld reader entries (%lld past their lease), %lld hash "
                   "fields\n", z, past, h);
        }
        for (int i = 0; good && i < opt.reps; i++) {
            double calls0, calls1;
            if (crowd_mark(cr, 0) || script_calls(c, &calls0)) {
                good = 0;
                break;
            }
            int64_t w0 = now_ns();
            long z = keyspace ? zadds_for(name, window_s) : -1;
            if (z < 0) sleep_ns(w0 + (int64_t)(window_s * 1e9) - now_ns());
            int64_t w1 = now_ns();
            if (script_calls(c, &calls1) || crowd_mark(cr, 1)) {
                good = 0;
                break;
            }
            double periods = (double)(w1 - w0) / 1e9 / period_s;
            struct crowd_totals t = crowd_totals(cr);
            sample_add(&calls, (double)t.renewal_calls / periods);
            sample_add(&entries_ren, (double)t.renewals / periods);
            if (z >= 0) sample_add(&zadds, (double)z / periods);
            sample_add(&evalsha, (calls1 - calls0) / periods);
            sample_add(&lost, (double)t.lost);
            printf("  W13 renewals, %d x %d: per lease period %.1f renewal calls, %.1f entries "
                   "renewed, server: %.1f ZADDs of the reader entries, %.1f script calls in all; "
                   "%llu lost\n",
                   procs, threads, (double)t.renewal_calls / periods, (double)t.renewals / periods,
                   z >= 0 ? (double)z / periods : NAN, (calls1 - calls0) / periods,
                   (unsigned long long)t.lost);
        }
        if (cr && crowd_stop(cr)) good = 0;
        static double ideal[NLAYOUTS];
        ideal[k] = 3.0 * procs;
        char fig[96], held[40];
        snprintf(held, sizeof held, "%d reads in %d proc%s", procs * threads % 100000, procs % 1000,
                 procs > 1 ? "s" : "");
        snprintf(fig, sizeof fig, "%s: renewal calls per lease period", held);
        struct row *row = report_row("W13", fig, "calls", good ? &calls : NULL);
        row_limit_ref(row, &ideal[k], 1, "1 per lease/3 per process");
        row_target(row, "≤ 1.5 × that", ON_RATIO, J_LE, 1.5, 0);
        if (!good) row_na(row, "error, see stderr");
        snprintf(fig, sizeof fig, "%s: entries renewed per lease period", held);
        row = report_row("W13", fig, "entries", good ? &entries_ren : NULL);
        row_limit_ref(row, &ideal[k], 1, "1 per lease/3 per process");
        snprintf(fig, sizeof fig, "%s: server's ZADDs of reader entries per lease period", held);
        row = report_row("W13", fig, "ZADDs", good && zadds.n ? &zadds : NULL);
        row_limit_ref(row, &ideal[k], 1, "1 per lease/3 per process");
        if (good && !zadds.n) row_na(row, "no keyspace notifications (CONFIG SET refused)");
        else if (good) snprintf(row->note, sizeof row->note, "keyspace notifications on the readers zset");
        snprintf(fig, sizeof fig, "%s: server's script calls per lease period", held);
        row = report_row("W13", fig, "calls", good ? &evalsha : NULL);
        if (good) snprintf(row->note, sizeof row->note, "renewals + the registry's announcements");
        snprintf(fig, sizeof fig, "%s: holds lost in 2 lease periods", held);
        row = report_row("W13", fig, "holds", good ? &lost : NULL);
        row_target(row, "0", ON_VALUE, J_LE, 0, 1);
    }
    if (keyspace && (r = rcmd(c, "CONFIG SET notify-keyspace-events %s", old_events))) freeReplyObject(r);
    if (c) redisFree(c);
    bench_configure("");
}

void w13_run(void)
{
    pairs_part();
    readers_part();
    w13_handoff_run();
    renewals_part();
}
