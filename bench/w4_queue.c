/* w4_queue.c -- W4: the Redis-side cost of the fair lock's script against
 * the depth of its queue.
 *
 * For N = 1, 100, 1 000 and 10 000 queued waiters, fair.lua (read from
 * src/lua) is called directly with synthetic owners: the queue is built
 * with one acquire per waiter, their liveness deadlines 10 minutes ahead,
 * behind a synthetic holder.  Each operation is timed by Redis itself:
 * INFO commandstats before and after a chunk of 25 calls (cmdstats.c), the
 * timed calls made with EVALSHA and everything else (refills, clean-ups)
 * with EVAL, which Redis counts apart.  Four phases, each keeping the
 * depth at N:
 *
 *   enqueue  acquire by a newcomer while the lock is held (joins the tail);
 *            the newcomer is cancelled again (EVAL)
 *   cancel   cancel by the waiter in the middle of the queue; a newcomer
 *            refills (EVAL)
 *   unlock   release by the holder, which grants the lock to the head (the
 *            direct hand-off); a newcomer refills (EVAL)
 *   grant    acquire by a newcomer after the lock key was deleted (as when
 *            a lease runs out): the script grants the head, then queues the
 *            newcomer
 *
 * A repetition's figure is the median of its chunks' mean microseconds per
 * call; the table has the median over the repetitions.  The limit of an N=1
 * row is EVALSHA of "return 1" timed the same way; every other row is held
 * against its N=1 row (target: N=10 000 at most twice N=1).  The medians go
 * to --data DIR/w4_queue.dat for the chart.  Then the live crowds
 * (w4_crowd.c): real threads queued in four processes, their waits
 * against strict FIFO's bound. */
#include "bench.h"
#include "cmdstats.h"
#include "report.h"
#include "server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ENQ, CANCEL, UNLOCK, GRANT, NOPS };
static const char *const op_name[NOPS] = { "enqueue", "cancel", "unlock (hand-off to head)",
                                           "grant (lock found free)" };
static const int depth[] = { 1, 100, 1000, 10000 };
#define NDEPTH 4

struct fair {
    redisContext *c;
    char sha[41];
    char keys[10][256];
    char *text; /* the script, for EVAL */
    size_t len;
};

#define CHUNK 25

/* Append one fair.lua call (pipelined; read with redisGetReply): by
 * EVALSHA when it is to be timed, else by EVAL.  The arguments are the
 * library's (fair.lua's header): hold lease 30 s, waiter lease 10 min. */
static void call(struct fair *f, int timed, const char *op, const char *owner, long acq)
{
    char acqs[24];
    snprintf(acqs, sizeof acqs, "%ld", acq);
    const char *argv[23] = { timed ? "EVALSHA" : "EVAL", timed ? f->sha : f->text, "10" };
    size_t lens[23];
    for (int i = 0; i < 10; i++) argv[3 + i] = f->keys[i];
    const char *rest[] = { op, owner, acqs, "30000", "600000", "0", "0", "0", "86400000", "publish" };
    memcpy(argv + 13, rest, sizeof rest);
    for (int i = 0; i < 23; i++) lens[i] = strlen(argv[i]);
    if (!timed) lens[1] = f->len;
    redisAppendCommandArgv(f->c, 23, argv, lens);
}

static int replies(struct fair *f, int n)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(f->c, (void **)&r) != REDIS_OK || !r) {
            fprintf(stderr, "bench W4: %s\n", f->c->errstr);
            return -1;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "bench W4: fair.lua: %s\n", r->str);
            ok = 0;
        }
        freeReplyObject(r);
    }
    return ok ? 0 : -1;
}

/* Timing by chunks: chunk_begin() before CHUNK steps, chunk_end() after;
 * the mean microseconds per EVALSHA of each chunk are collected. */
struct timing {
    double calls, usec;
    double v[64];
    int n;
};

static void chunk_begin(struct fair *f, struct timing *t) { evalsha_totals(f->c, &t->calls, &t->usec); }

static void chunk_end(struct fair *f, struct timing *t)
{
    double calls, usec;
    if (evalsha_totals(f->c, &calls, &usec) || calls <= t->calls || t->n >= 64) return;
    t->v[t->n++] = (usec - t->usec) / (calls - t->calls);
}

static double timing_median(struct timing *t)
{
    struct sample s = { .n = 0 };
    for (int i = 0; i < t->n; i++) sample_add(&s, t->v[i]);
    return sample_median(&s);
}

static int load_fair(struct fair *f)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/fair.lua", opt.lua_dir);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return -1;
    }
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = 0;
    f->text = text;
    f->len = n;
    redisReply *r = redisCommand(f->c, "SCRIPT LOAD %b", text, n);
    if (!r || r->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "bench W4: SCRIPT LOAD fair.lua failed\n");
        if (r) freeReplyObject(r);
        return -1;
    }
    snprintf(f->sha, sizeof f->sha, "%s", r->str);
    freeReplyObject(r);
    return 0;
}

static void set_keys(struct fair *f, const char *name)
{
    static const char *const prefix[10] = { NULL, "rmutex_fair_queue", "rmutex_fair_alive",
                                            "rmutex_fair_seq", "redisson_lock_token", "rmutex_owner",
                                            "rmutex_notrecoverable", "rmutex_fair_channel",
                                            "redisson_lock__channel", "rmutex_fair_lease" };
    snprintf(f->keys[0], sizeof f->keys[0], "%s", name);
    for (int i = 1; i < 10; i++) snprintf(f->keys[i], sizeof f->keys[i], "%s:{%s}", prefix[i], name);
}

/* The waiters in queue order, as owner numbers (owner(k), acquisition 1). */
struct deque {
    long *v;
    size_t head, n, cap;
};

static long dq_at(struct deque *d, size_t i) { return d->v[(d->head + i) % d->cap]; }
static void dq_push(struct deque *d, long x) { d->v[(d->head + d->n++) % d->cap] = x; }
static long dq_pop(struct deque *d)
{
    long x = d->v[d->head];
    d->head = (d->head + 1) % d->cap;
    d->n--;
    return x;
}
static void dq_remove(struct deque *d, size_t i)
{
    for (size_t k = i; k + 1 < d->n; k++) d->v[(d->head + k) % d->cap] = d->v[(d->head + k + 1) % d->cap];
    d->n--;
}

/* Owners shaped as the library's, "<process>:<thread>" (the script finds a
 * waiter's process, and its grant channel, before the last colon). */
#define HOLDER "bench-holder:1"
static void owner(char *buf, size_t n, long k) { snprintf(buf, n, "bench-w%ld:1", k); }

/* One depth, one repetition: the four figures in out[NOPS]. */
static int measure(struct fair *f, int rep, int N, int K, double out[NOPS])
{
    char name[128], what[64], o[32];
    snprintf(what, sizeof what, "w4:%d:%d", N, rep);
    lock_name(name, sizeof name, what);
    set_keys(f, name);
    struct deque d = { calloc((size_t)N + 2, sizeof(long)), 0, 0, (size_t)N + 2 };
    long next = 0, holder = -1;
    int r = 0;
    struct timing t[NOPS];
    memset(t, 0, sizeof t);

    call(f, 0, "acquire", HOLDER, 1); /* lock free, queue empty: taken */
    r |= replies(f, 1);
    for (int i = 0; i < N && !r; i += 1000) {
        int n = N - i < 1000 ? N - i : 1000;
        for (int k = 0; k < n; k++) {
            owner(o, sizeof o, next);
            call(f, 0, "acquire", o, 1);
            dq_push(&d, next++);
        }
        r |= replies(f, n);
    }

    for (int op = 0; op < NOPS && !r; op++) {
        for (int k = 0; k < K && !r; k++) {
            if (k % CHUNK == 0) chunk_begin(f, &t[op]);
            switch (op) {
            case ENQ: /* timed enqueue at the tail, then the newcomer leaves */
                owner(o, sizeof o, next++);
                call(f, 1, "acquire", o, 1);
                call(f, 0, "cancel", o, 1);
                break;
            case CANCEL: { /* timed cancel in the middle, then a refill */
                size_t mid = d.n / 2;
                owner(o, sizeof o, dq_at(&d, mid));
                call(f, 1, "cancel", o, 1);
                dq_remove(&d, mid);
                owner(o, sizeof o, next);
                call(f, 0, "acquire", o, 1);
                dq_push(&d, next++);
                break;
            }
            case UNLOCK: /* timed release with hand-off to the head, refill */
                if (holder < 0) snprintf(o, sizeof o, HOLDER);
                else owner(o, sizeof o, holder);
                call(f, 1, "release", o, 0);
                holder = dq_pop(&d);
                owner(o, sizeof o, next);
                call(f, 0, "acquire", o, 1);
                dq_push(&d, next++);
                break;
            default: /* GRANT: the lock key vanishes; a timed acquire grants the head */
                redisAppendCommand(f->c, "DEL %s", f->keys[0]);
                owner(o, sizeof o, next);
                call(f, 1, "acquire", o, 1);
                holder = dq_pop(&d);
                dq_push(&d, next++);
                break;
            }
            r |= replies(f, 2);
            if (k % CHUNK == CHUNK - 1 || k == K - 1) chunk_end(f, &t[op]);
        }
        out[op] = timing_median(&t[op]);
    }

    redisReply *x = rcmd(f->c, "DEL %s %s %s %s %s %s %s", f->keys[0], f->keys[1], f->keys[2],
                         f->keys[3], f->keys[4], f->keys[5], f->keys[9]);
    if (x) freeReplyObject(x);
    free(d.v);
    return r;
}

static double trivial(struct fair *f, int K)
{
    struct timing t = { .n = 0 };
    for (int k = 0; k < K; k++) {
        if (k % CHUNK == 0) chunk_begin(f, &t);
        redisAppendCommand(f->c, "EVALSHA %s 0", lim.sha);
        if (replies(f, 1)) return NAN;
        if (k % CHUNK == CHUNK - 1 || k == K - 1) chunk_end(f, &t);
    }
    return timing_median(&t);
}

static double base[NOPS], trivial_med;

/* The medians, for the chart. */
static void write_data(struct sample s[NOPS][NDEPTH])
{
    char path[1024];
    snprintf(path, sizeof path, "%s/w4_queue.dat", opt.data_dir);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        perror(path);
        return;
    }
    fprintf(fp, "# W4 fair.lua Redis-side time (INFO commandstats, median of chunk means, median of %d "
                "repetitions, min, max) against queue depth N\n# 'return 1' script: %.2f us\n"
                "# N enqueue min max cancel min max unlock min max grant min max\n",
            opt.reps, trivial_med);
    for (int i = 0; i < NDEPTH; i++) {
        fprintf(fp, "%d", depth[i]);
        for (int op = 0; op < NOPS; op++)
            fprintf(fp, " %.3f %.3f %.3f", sample_median(&s[op][i]), sample_min(&s[op][i]),
                    sample_max(&s[op][i]));
        fprintf(fp, "\n");
    }
    fclose(fp);
}

void w4_run(void)
{
    struct fair f = { server_connect() };
    struct sample s[NOPS][NDEPTH], triv = { .n = 0 };
    memset(s, 0, sizeof s);
    int K = opt.quick ? 100 : 300, ok = f.c && !load_fair(&f);
    for (int rep = 0; ok && rep < opt.reps; rep++) {
        sample_add(&triv, trivial(&f, K));
        for (int i = 0; ok && i < NDEPTH; i++) {
            double out[NOPS];
            if (measure(&f, rep, depth[i], K, out)) {
                ok = 0;
                break;
            }
            printf("  W4 N=%d: enqueue %.1f cancel %.1f unlock %.1f grant %.1f us\n", depth[i],
                   out[ENQ], out[CANCEL], out[UNLOCK], out[GRANT]);
            for (int op = 0; op < NOPS; op++) sample_add(&s[op][i], out[op]);
        }
    }
    if (f.c) redisFree(f.c);

    trivial_med = sample_median(&triv);
    struct row *row = report_row("W4", "EVALSHA 'return 1', Redis-side (INFO commandstats)", "µs", ok ? &triv : NULL);
    if (!ok) row_na(row, "error, see stderr");
    for (int op = 0; op < NOPS; op++) {
        base[op] = sample_median(&s[op][0]);
        for (int i = 0; i < NDEPTH; i++) {
            char fig[96];
            snprintf(fig, sizeof fig, "fair.lua %s, N=%d queued", op_name[op], depth[i]);
            row = report_row("W4", fig, "µs", ok ? &s[op][i] : NULL);
            if (i == 0) row_limit_ref(row, &trivial_med, 1, "'return 1'");
            else row_limit_ref(row, &base[op], 1, "N=1");
            if (depth[i] == 10000) row_target(row, "ratio ≤ 2", ON_RATIO, J_LE, 2, 0);
        }
    }
    if (ok && opt.data_dir) write_data(s);
    w4_crowd_run();
}
