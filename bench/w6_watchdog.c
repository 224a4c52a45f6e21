/* w6_watchdog.c -- W6: 10 000 held locks kept alive by the watchdog.
 *
 * With lease=2000 (so three lease periods take 6 s), four threads take
 * 2 500 locks each and hold them; for three lease periods nothing else
 * happens.  Read over that window:
 *
 *   - renewal script calls per lease period (rmutex_stats renewal_calls);
 *     the limit is the ideal batching: every hold renewed every lease/3,
 *     400 per call (the watchdog's batch size), i.e. 3 * 10 000 / 400 = 75;
 *   - renewals per hold per period (3 expected: renewed at lease/3);
 *   - expiries: holds found lost (rmutex_stats locks_lost), and unlocks
 *     that returned EPERM afterwards;
 *   - the watchdog thread's CPU time, from /proc/self/task/<tid>/stat of
 *     the thread named rmutex-wd, as a share of one core; and the Redis
 *     server's CPU over the same window (INFO cpu), beside it. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NHOLDS 10000
#define NTHR 4
#define LEASE_MS 2000
#define BATCH 400

static rmutex_t locks[NHOLDS];

struct holder {
    int first, n;
    _Atomic int *taken, *release;
    int err, eperm;
};

static void *hold(void *arg)
{
    struct holder *h = arg;
    for (int i = h->first; i < h->first + h->n; i++) {
        int r = rmutex_lock(&locks[i]);
        if (r && !h->err) {
            h->err = r;
            fprintf(stderr, "bench W6: lock: %s (%s)\n", strerror(r), rmutex_detail());
        }
    }
    atomic_fetch_add(h->taken, 1);
    while (!atomic_load(h->release)) sleep_ns(10000000);
    for (int i = h->first; i < h->first + h->n; i++) {
        int r = rmutex_unlock(&locks[i]);
        if (r == EPERM) h->eperm++;
        else if (r && !h->err) h->err = r;
    }
    return NULL;
}

/* CPU seconds (user + system) of this process's thread named comm, or NAN. */
static double thread_cpu(const char *comm)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return NAN;
    double cpu = NAN;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int match = fgets(buf, sizeof buf, f) && !strncmp(buf, comm, strlen(comm)) &&
                    (buf[strlen(comm)] == '\n' || buf[strlen(comm)] == 0);
        fclose(f);
        if (!match) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        /* Fields after "(comm)": state is field 3; utime and stime are 14, 15. */
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        break;
    }
    closedir(d);
    return cpu;
}

static double redis_cpu(redisContext *c)
{
    return info_field(c, "cpu", "used_cpu_user") + info_field(c, "cpu", "used_cpu_sys");
}

struct w6_out {
    double calls, renewals, lost, eperm, cpu, redis_cpu;
};

static int rep(int r, struct w6_out *o)
{
    char what[64], name[128];
    rmutexattr_t a;
    rmutexattr_init(&a);
    for (int i = 0; i < NHOLDS; i++) {
        snprintf(what, sizeof what, "w6:%d:%d", r, i);
        lock_name(name, sizeof name, what);
        if (rmutex_init(&locks[i], name, &a)) return -1;
    }
    redisContext *c = server_connect();
    if (!c) return -1;
    _Atomic int taken = 0, release = 0;
    struct holder h[NTHR];
    pthread_t tid[NTHR];
    for (int t = 0; t < NTHR; t++) {
        h[t] = (struct holder){ t * (NHOLDS / NTHR), NHOLDS / NTHR, &taken, &release, 0, 0 };
        pthread_create(&tid[t], NULL, hold, &h[t]);
    }
    while (atomic_load(&taken) < NTHR) sleep_ns(10000000);
    rmutex_stats_t s0 = stats_now();
    double cpu0 = thread_cpu("rmutex-wd"), rc0 = redis_cpu(c);
    int64_t t0 = now_ns();
    sleep_ns(3LL * LEASE_MS * 1000000);
    rmutex_stats_t s1 = stats_now();
    double cpu1 = thread_cpu("rmutex-wd"), rc1 = redis_cpu(c);
    int64_t t1 = now_ns();
    atomic_store(&release, 1);
    int ok = 1;
    for (int t = 0; t < NTHR; t++) {
        pthread_join(tid[t], NULL);
        if (h[t].err) ok = 0;
        o->eperm += h[t].eperm;
    }
    double secs = (double)(t1 - t0) / 1e9, periods = secs / (LEASE_MS / 1000.0);
    o->calls = (double)(s1.renewal_calls - s0.renewal_calls) / periods;
    o->renewals = (double)(s1.renewals - s0.renewals) / periods / NHOLDS;
    o->lost = (double)(s1.locks_lost - s0.locks_lost);
    o->cpu = 100 * (cpu1 - cpu0) / secs;
    o->redis_cpu = 100 * (rc1 - rc0) / secs;
    if (isnan(o->cpu)) {
        fprintf(stderr, "bench W6: no thread named rmutex-wd\n");
        ok = 0;
    }
    for (int i = 0; i < NHOLDS; i++) rmutex_destroy(&locks[i]);
    redisFree(c);
    return ok ? 0 : -1;
}

static double ideal_calls;

void w6_run(void)
{
    struct sample calls = { .n = 0 }, ren = { .n = 0 }, lost = { .n = 0 }, eperm = { .n = 0 },
                  cpu = { .n = 0 }, rcpu = { .n = 0 };
    char opts[64];
    snprintf(opts, sizeof opts, "lease=%d", LEASE_MS);
    int ok = !bench_configure(opts);
    for (int r = 0; ok && r < opt.reps; r++) {
        struct w6_out o = { 0 };
        if (rep(r, &o)) {
            ok = 0;
            break;
        }
        printf("  W6: %.1f calls/period, %.2f renewals/hold/period, lost %.0f, EPERM %.0f, "
               "watchdog CPU %.2f%%, redis CPU %.1f%%\n",
               o.calls, o.renewals, o.lost, o.eperm, o.cpu, o.redis_cpu);
        sample_add(&calls, o.calls);
        sample_add(&ren, o.renewals);
        sample_add(&lost, o.lost);
        sample_add(&eperm, o.eperm);
        sample_add(&cpu, o.cpu);
        sample_add(&rcpu, o.redis_cpu);
    }
    bench_configure("");
    ideal_calls = ceil(3.0 * NHOLDS / BATCH);
    struct row *r = report_row("W6", "renewal script calls per lease period (10 000 holds)", "calls", &calls);
    row_limit_ref(r, &ideal_calls, 1, "ideal");
    row_target(r, "≤ 100", ON_VALUE, J_LE, 100, 0);
    if (!ok) row_na(r, "error, see stderr");
    report_row("W6", "renewals per hold per lease period", "renewals", ok ? &ren : NULL);
    r = report_row("W6", "expiries (holds found lost) in 3 lease periods", "holds", ok ? &lost : NULL);
    row_target(r, "0", ON_VALUE, J_LE, 0, 1);
    r = report_row("W6", "unlocks returning EPERM afterwards", "holds", ok ? &eperm : NULL);
    row_target(r, "0", ON_VALUE, J_LE, 0, 1);
    r = report_row("W6", "watchdog thread CPU (rmutex-wd)", "% core", ok ? &cpu : NULL);
    row_target(r, "< 5 %", ON_VALUE, J_LE, 5, 0);
    report_row("W6", "redis-server CPU over the same window", "% core", ok ? &rcpu : NULL);
}
