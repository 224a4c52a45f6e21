/* faults.c -- rmutex under injected faults, with a history checker.
 *
 * DESIGN
 * ------
 * The program starts its own redis-server (append-only file, fsync always,
 * so that a restart keeps the locks) on a free loopback port, forks PROCS
 * worker processes of THREADS threads each, and lets them contend on one
 * lock name of the chosen kind (non-fair, fair, or a read-write lock whose
 * workers read three times in four) for SECONDS, while the parent injects
 * faults:
 *
 *   kill-cmd     CLIENT KILL TYPE normal, five times 100 ms apart (a storm
 *                on the command and watchdog connections)
 *   kill-sub     CLIENT KILL TYPE pubsub, likewise (the multiplexer's)
 *   pause        CLIENT PAUSE for 1.5 waiter leases (longer than the command
 *                timeout and the waiter lease, shorter than the lease)
 *   sleep        DEBUG SLEEP for 1.5 command timeouts (the server itself
 *                stalls, pub/sub included)
 *   stall        DEBUG SLEEP for 1.5 leases (3 s): every lease runs out on
 *                the server's clock while nobody can renew it
 *   restart      SHUTDOWN (the append-only file is fsynced) and start again
 *                on the same port
 *   wipe         kill -9 of the server and a start without its data (a
 *                restart without persistence): every hold and the fencing
 *                counter are gone.  The README allows two holders then; the
 *                checker allows overlaps that began within a lease of it,
 *                and the program restores the fencing counter above every
 *                token used (the recovery the README asks of an operator)
 *   kill9        kill -9 of a random worker (a holder or a waiter), then a
 *                new worker in its place
 *   stop         SIGSTOP of a random worker for 1.5 leases, then SIGCONT: a
 *                holder paused past its lease, whose late write the fencing
 *                token must reject
 *   blackhole    the workers reach Redis through a loopback proxy in this
 *                process; for 1.5 waiter leases it drops every byte, both
 *                ways, without closing anything (a congested or broken
 *                network), so the streams that survive are out of step
 *
 * The protected resource lives in shared memory: a counter and a fence (the
 * highest fencing token that has touched it).  A critical section raises
 * the fence to its token, reads the counter, sleeps a little, and writes
 * counter + 1 -- if its token is not below the fence; a write below the
 * fence is rejected and counted, as a real fenced store would.  Every hold is
 * recorded: process, thread, token, when it read and when it wrote
 * (CLOCK_MONOTONIC, which is system-wide), and whether its write was
 * accepted.
 *
 * A read-write lock's readers write nothing: they read the counter at the
 * start and at the end of their hold and record both.  And every hold
 * counts itself in and out of live counters (per worker process, so that a
 * kill -9 does not leave a count behind): a reader that finds a writer
 * inside, or a writer that finds anybody else inside, records a conflict.
 * A hold whose unlock said EPERM was lost (its lease ran out: a process
 * stopped past it, a server stalled past it) and was told so.
 *
 * The checker, after the run: the read-modify-writes of two holds whose
 * write was accepted must not overlap in time (the README allows overlap
 * only for a holder paused past its lease, whose write the fence then
 * rejects); the counter must equal
 * the number of accepted writes (no lost update); it reports the longest
 * time without any acquisition and every error code the API returned.
 * For the read-write lock, moreover: no writer's hold may overlap another
 * hold, no reader may see the counter move, and no hold may have seen a
 * conflict -- unless one of the holds involved was lost and told so.
 * Exit status 0 when everything held, 1 on a violation, 2 on a setup
 * failure.
 *
 *   rmutex_faults --redis-server PATH [--seconds N] [--kind nonfair|fair|rwlock]
 *                 [--procs P] [--threads T] [--faults a,b,...]
 *
 * Leases are short (lease 2 s, waiter lease 1 s, command timeout 500 ms) so
 * that every fault is longer than what it should outlast. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rmutex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEASE_MS 2000
#define WAITER_LEASE_MS 1000
#define COMMAND_TIMEOUT_MS 500
#define MAX_HOLDS 2000000
#define MAX_PROCS 16
#define MAX_ERRNO 256

struct hold {
    int32_t pid, thread;
    uint64_t token;
    int64_t start, wrote, end; /* read at start, write at wrote (or refused) */
    int32_t accepted;
    /* The read-write lock's: a reader (writer 0) read `seen` at the start
     * and `seen_end` at the end; conflict: the live counters showed a
     * writer beside it (or anybody beside a writer); lost: its unlock said
     * EPERM. */
    int8_t writer, conflict, lost;
    int64_t seen, seen_end;
};

struct shared {
    _Atomic uint64_t nholds;
    pthread_mutex_t store;     /* the store's own atomicity (robust, shared) */
    int64_t counter;           /* the protected resource */
    uint64_t fence;            /* highest token that touched it */
    uint64_t accepted, rejected;
    _Atomic uint64_t errors[MAX_ERRNO];
    _Atomic int stop;
    _Atomic uint64_t fence_errors; /* rrwlock_fence failed (the writer then has no token) */
    _Atomic int readers_in[MAX_PROCS], writers_in[MAX_PROCS]; /* the rwlock's live counters */
    struct hold holds[MAX_HOLDS];
};

static struct shared *sh;
static char url[256], lock_name[128];
static int fair, rw, threads = 2, slot; /* slot: this worker's index */

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) && errno == EINTR) {}
}

/* The store's own lock: process-shared and robust, since workers are
 * killed and stopped at any point.  It orders the store's operations; it
 * is not the lock under test. */
static void store_enter(void)
{
    if (pthread_mutex_lock(&sh->store) == EOWNERDEAD) pthread_mutex_consistent(&sh->store);
}

static void store_leave(void) { pthread_mutex_unlock(&sh->store); }

static void count_error(int rc)
{
    atomic_fetch_add(&sh->errors[rc > 0 && rc < MAX_ERRNO ? rc : 0], 1);
}

/* ---- workers ---------------------------------------------------------- */

static void *worker_thread(void *arg)
{
    int thread = (int)(intptr_t)arg;
    rmutex_t m;
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, fair);
    if (rmutex_init(&m, lock_name, &a)) {
        count_error(EINVAL);
        return NULL;
    }
    while (!atomic_load(&sh->stop)) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += 20;
        int rc = rmutex_clocklock(&m, CLOCK_MONOTONIC, &dl);
        if (rc) {
            count_error(rc);
            continue;
        }
        struct hold h = { .pid = getpid(), .thread = thread, .start = now_ns() };
        rmutex_fence(&m, &h.token);
        /* The fenced store: every access raises its fence to the caller's
         * token, and a write below the fence is refused -- so a holder
         * paused past its lease cannot write over what a later holder has
         * read or written. */
        store_enter();
        if (h.token > sh->fence) sh->fence = h.token;
        int64_t v = sh->counter;
        store_leave();
        sleep_ms(1 + rand() % 3);
        store_enter();
        if (h.token >= sh->fence) {
            sh->counter = v + 1;
            sh->accepted++;
            h.accepted = 1;
        } else {
            sh->rejected++;
        }
        store_leave();
        h.wrote = h.end = now_ns();
        rc = rmutex_unlock(&m);
        if (rc) count_error(rc);
        uint64_t i = atomic_fetch_add(&sh->nholds, 1);
        if (i < MAX_HOLDS) sh->holds[i] = h;
    }
    rmutex_destroy(&m);
    return NULL;
}

/* Everyone inside now, by the live counters. */
static void inside_now(int *readers, int *writers)
{
    *readers = *writers = 0;
    for (int i = 0; i < MAX_PROCS; i++) {
        *readers += atomic_load(&sh->readers_in[i]);
        *writers += atomic_load(&sh->writers_in[i]);
    }
}

/* Does the hold, counted in, see anybody it must not? */
static int conflicting(int writer)
{
    int r, w;
    inside_now(&r, &w);
    return writer ? r != 0 || w != 1 : w != 0;
}

static void *rw_worker_thread(void *arg)
{
    int thread = (int)(intptr_t)arg;
    rrwlock_t l;
    if (rrwlock_init(&l, lock_name, NULL)) {
        count_error(EINVAL);
        return NULL;
    }
    unsigned seed = (unsigned)getpid() * 31 + (unsigned)thread;
    while (!atomic_load(&sh->stop)) {
        int writer = rand_r(&seed) % 4 == 0;
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += 20;
        int rc = writer ? rrwlock_clockwrlock(&l, CLOCK_MONOTONIC, &dl)
                        : rrwlock_clockrdlock(&l, CLOCK_MONOTONIC, &dl);
        if (rc) {
            count_error(rc);
            continue;
        }
        _Atomic int *in = writer ? &sh->writers_in[slot] : &sh->readers_in[slot];
        atomic_fetch_add(in, 1);
        struct hold h = { .pid = getpid(), .thread = thread, .start = now_ns(), .writer = (int8_t)writer };
        h.conflict = (int8_t)conflicting(writer);
        if (writer && (rc = rrwlock_fence(&l, &h.token))) { /* no token: its write is refused */
            count_error(rc);
            atomic_fetch_add(&sh->fence_errors, 1);
        }
        store_enter();
        if (writer && h.token > sh->fence) sh->fence = h.token;
        h.seen = sh->counter;
        store_leave();
        sleep_ms(1 + rand_r(&seed) % 3);
        store_enter();
        if (writer && h.token >= sh->fence) {
            sh->counter = h.seen + 1;
            sh->accepted++;
            h.accepted = 1;
        } else if (writer) {
            sh->rejected++;
        }
        h.seen_end = writer ? h.seen : sh->counter;
        store_leave();
        h.conflict |= (int8_t)conflicting(writer);
        h.wrote = h.end = now_ns();
        atomic_fetch_sub(in, 1);
        rc = rrwlock_unlock(&l);
        h.lost = rc == EPERM;
        if (rc) count_error(rc);
        uint64_t i = atomic_fetch_add(&sh->nholds, 1);
        if (i < MAX_HOLDS) sh->holds[i] = h;
    }
    rrwlock_destroy(&l);
    return NULL;
}

static void worker(void)
{
    pthread_t t[16];
    srand((unsigned)getpid());
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, rw ? rw_worker_thread : worker_thread, (void *)(intptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    _exit(0);
}

static pid_t spawn_worker(int index)
{
    atomic_store(&sh->readers_in[index], 0); /* a killed worker's counts go with it */
    atomic_store(&sh->writers_in[index], 0);
    pid_t p = fork();
    if (p == 0) {
        slot = index;
        worker();
    }
    return p;
}

/* ---- the server -------------------------------------------------------- */

static char server_bin[512], dir[64];
static int port;
static pid_t server_pid = -1;

static int free_port(void)
{
    for (int i = 0; i < 100; i++) {
        int p = 20000 + rand() % 30000;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (ok) return p;
    }
    return -1;
}

static redisContext *admin(void)
{
    struct timeval tv = { 1, 0 };
    return redisConnectWithTimeout("127.0.0.1", port, tv);
}

static int server_start(void)
{
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    server_pid = fork();
    if (server_pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execlp(server_bin, server_bin, "--port", ports, "--bind", "127.0.0.1", "--dir", dir,
              "--appendonly", "yes", "--appendfsync", "always", "--save", "",
              "--enable-debug-command", "local", (char *)NULL); /* DEBUG SLEEP (Redis 7) */
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        int status;
        if (waitpid(server_pid, &status, WNOHANG) == server_pid) { /* e.g. the port was taken */
            server_pid = -1;
            return -1;
        }
        redisContext *c = admin();
        if (c && !c->err) {
            /* Ours, not another test's on the same port: its dir is ours. */
            redisReply *r = redisCommand(c, "CONFIG GET dir");
            int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                     r->element[1]->type == REDIS_REPLY_STRING && strstr(r->element[1]->str, dir + 5);
            freeReplyObject(r);
            redisFree(c);
            if (ok) return 0;
        } else if (c) {
            redisFree(c);
        }
        sleep_ms(25);
    }
    return -1;
}

static void server_cmd(const char *fmt, ...)
{
    redisContext *c = admin();
    if (c && !c->err) {
        va_list ap;
        va_start(ap, fmt);
        redisReply *r = redisvCommand(c, fmt, ap);
        va_end(ap);
        freeReplyObject(r);
    }
    if (c) redisFree(c);
}

static void server_stop(void)
{
    server_cmd("SHUTDOWN");
    int st;
    if (server_pid > 0) waitpid(server_pid, &st, 0);
    server_pid = -1;
}

/* ---- the proxy --------------------------------------------------------- */

/* Every worker connection goes through here: accept on proxy_port, dial
 * the server, copy both ways.  While blackhole_until is in the future every
 * byte read is dropped.  A side that closes closes the pair. */
#define MAX_PAIRS 512
static int proxy_port, proxy_fd;
static _Atomic int64_t blackhole_until;
/* Set once every worker is gone: a worker finishing its last call after
 * the run still needs the proxy (stopped with the workers, it left them
 * waiting out their deadline on a dead connection). */
static _Atomic int proxy_stop;

static int listen_on(int *p)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 128) ||
        getsockname(fd, (struct sockaddr *)&sa, &len)) {
        close(fd);
        return -1;
    }
    *p = ntohs(sa.sin_port);
    return fd;
}

static int dial_server(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *proxy_main(void *arg)
{
    (void)arg;
    static int a[MAX_PAIRS], b[MAX_PAIRS];
    int n = 0;
    char buf[16384];
    while (!atomic_load(&proxy_stop)) {
        struct pollfd p[1 + 2 * MAX_PAIRS];
        p[0] = (struct pollfd){ proxy_fd, POLLIN, 0 };
        for (int i = 0; i < n; i++) {
            p[1 + 2 * i] = (struct pollfd){ a[i], POLLIN, 0 };
            p[2 + 2 * i] = (struct pollfd){ b[i], POLLIN, 0 };
        }
        if (poll(p, (nfds_t)(1 + 2 * n), 100) <= 0) continue;
        int drop = now_ns() < atomic_load(&blackhole_until);
        for (int i = n - 1; i >= 0; i--) {
            int closed = 0;
            for (int side = 0; side < 2 && !closed; side++) {
                if (!(p[1 + 2 * i + side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                int from = side ? b[i] : a[i], to = side ? a[i] : b[i];
                ssize_t got = read(from, buf, sizeof buf);
                if (got <= 0) closed = 1;
                else if (!drop && write(to, buf, (size_t)got) != got) closed = 1;
            }
            if (closed) {
                close(a[i]);
                close(b[i]);
                a[i] = a[n - 1];
                b[i] = b[n - 1];
                n--;
            }
        }
        if ((p[0].revents & POLLIN) && n < MAX_PAIRS) {
            int c = accept4(proxy_fd, NULL, NULL, SOCK_CLOEXEC), s2 = c >= 0 ? dial_server() : -1;
            if (c >= 0 && s2 >= 0) {
                a[n] = c;
                b[n++] = s2;
            } else if (c >= 0) {
                close(c);
            }
        }
    }
    return NULL;
}

/* ---- faults ------------------------------------------------------------ */

static pid_t workers[MAX_PROCS];
static int procs = 4;

enum { F_KILL_CMD, F_KILL_SUB, F_PAUSE, F_SLEEP, F_STALL, F_RESTART, F_WIPE, F_KILL9, F_STOP,
       F_BLACKHOLE, F_COUNT };
static const char *fault_names[F_COUNT] = { "kill-cmd", "kill-sub", "pause", "sleep", "stall",
                                            "restart", "wipe", "kill9", "stop", "blackhole" };
#define MAX_WIPES 64
static int64_t wiped_at[MAX_WIPES];
static int nwipes;
static int enabled[F_COUNT];
static unsigned injected[F_COUNT];

static void inject(int f)
{
    int w = rand() % procs;
    switch (f) {
    case F_KILL_CMD:
    case F_KILL_SUB:
        for (int i = 0; i < 5; i++) {
            server_cmd("CLIENT KILL TYPE %s", f == F_KILL_CMD ? "normal" : "pubsub");
            sleep_ms(100);
        }
        break;
    case F_PAUSE:
        server_cmd("CLIENT PAUSE %d", WAITER_LEASE_MS * 3 / 2);
        sleep_ms(WAITER_LEASE_MS * 3 / 2);
        break;
    case F_SLEEP:
        server_cmd("DEBUG SLEEP %f", COMMAND_TIMEOUT_MS * 1.5 / 1000);
        break;
    case F_STALL:
        server_cmd("DEBUG SLEEP %f", LEASE_MS * 1.5 / 1000);
        break;
    case F_RESTART:
        server_stop();
        if (server_start()) fprintf(stderr, "faults: the server did not come back\n");
        break;
    case F_WIPE: {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        char rm[160];
        snprintf(rm, sizeof rm, "rm -rf '%s'/* '%s'/.[!.]*", dir, dir);
        if (system(rm)) {}
        if (nwipes < MAX_WIPES) wiped_at[nwipes++] = now_ns();
        if (server_start()) fprintf(stderr, "faults: the server did not come back\n");
        store_enter();
        uint64_t above = sh->fence + 1000000;
        store_leave();
        server_cmd("SET redisson_lock_token:{%s} %llu", lock_name, (unsigned long long)above);
        break;
    }
    case F_KILL9:
        kill(workers[w], SIGKILL);
        waitpid(workers[w], NULL, 0);
        workers[w] = spawn_worker(w);
        break;
    case F_STOP:
        kill(workers[w], SIGSTOP);
        sleep_ms(LEASE_MS * 3 / 2);
        kill(workers[w], SIGCONT);
        break;
    case F_BLACKHOLE:
        atomic_store(&blackhole_until, now_ns() + (int64_t)WAITER_LEASE_MS * 3 / 2 * 1000000);
        sleep_ms(WAITER_LEASE_MS * 3 / 2);
        break;
    }
    injected[f]++;
}

/* ---- the checker ------------------------------------------------------- */

static int by_start(const void *a, const void *b)
{
    const struct hold *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Did t fall within a lease of a wipe (which may let two holders in)? */
static int near_wipe(int64_t t)
{
    for (int w = 0; w < nwipes; w++)
        if (t >= wiped_at[w] - (int64_t)LEASE_MS * 1000000 && t <= wiped_at[w] + (int64_t)LEASE_MS * 1000000)
            return 1;
    return 0;
}

static void print_hold(const char *what, const struct hold *h)
{
    fprintf(stderr, "  %s %d/%d %s [%lld, %lld]%s%s\n", what, h->pid, h->thread,
            h->writer ? "writer" : "reader", (long long)h->start, (long long)h->end,
            h->conflict ? " saw a conflict" : "", h->lost ? " lost" : "");
}

/* The read-write lock's rules over the holds (sorted by start): a writer's
 * hold overlaps no other, a reader sees the counter stand still, no hold
 * saw a conflict in the live counters -- unless a hold involved was lost
 * and told so (EPERM: a lease that ran out while its process was stopped
 * or its server stalled), or it came within a lease of a wipe.  The
 * violations; *excused counts the others. */
static uint64_t rw_violations(const struct hold *hs, uint64_t n, uint64_t *excused)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        const struct hold *a = &hs[i];
        for (uint64_t j = i + 1; j < n && hs[j].start < a->end; j++) {
            const struct hold *b = &hs[j];
            if (!a->writer && !b->writer) continue;
            if (a->lost || b->lost || near_wipe(b->start)) {
                (*excused)++;
                continue;
            }
            if (++bad <= 5) {
                fprintf(stderr, "faults: a writer's hold overlaps another:\n");
                print_hold("", a);
                print_hold("", b);
            }
        }
        if (!a->conflict && a->seen == a->seen_end) continue;
        int excuse = a->lost || near_wipe(a->start);
        for (uint64_t k = 0; k < n && hs[k].start < a->end && !excuse; k++)
            excuse = k != i && hs[k].end > a->start && hs[k].lost;
        if (excuse) {
            (*excused)++;
        } else if (++bad <= 5) {
            fprintf(stderr, "faults: %s\n", a->conflict ? "a hold saw somebody it excludes inside"
                                                         : "a reader saw the counter move");
            print_hold("", a);
        }
    }
    return bad;
}

static int check(double seconds)
{
    uint64_t n = atomic_load(&sh->nholds);
    if (n > MAX_HOLDS) n = MAX_HOLDS;
    qsort(sh->holds, n, sizeof *sh->holds, by_start);
    uint64_t overlaps = 0, allowed = 0;
    int64_t longest_gap = 0, last_end = 0;
    const struct hold *open = NULL; /* the accepted hold whose write is the latest so far */
    for (uint64_t i = 0; i < n; i++) {
        const struct hold *h = &sh->holds[i];
        if (i && h->start - sh->holds[i - 1].start > longest_gap)
            longest_gap = h->start - sh->holds[i - 1].start;
        if (open && h->start < open->wrote && h->accepted && near_wipe(h->start)) {
            allowed++;
        } else if (open && h->start < open->wrote && h->accepted) {
            overlaps++;
            if (overlaps <= 5)
                fprintf(stderr, "faults: overlap: %d/%d token %llu [%lld, %lld] and %d/%d token "
                        "%llu [%lld, %lld]\n", open->pid, open->thread,
                        (unsigned long long)open->token, (long long)open->start,
                        (long long)open->wrote, h->pid, h->thread,
                        (unsigned long long)h->token, (long long)h->start, (long long)h->wrote);
        }
        if (h->accepted && h->wrote > last_end) {
            last_end = h->wrote;
            open = h;
        }
    }
    int64_t counter = sh->counter;
    uint64_t accepted = sh->accepted;
    int64_t lost = (int64_t)accepted - counter;
    uint64_t rw_excused = 0, rw_bad = rw ? rw_violations(sh->holds, n, &rw_excused) : 0;
    printf("faults: %s lock, %d procs x %d threads, %.0f s\n",
           rw ? "read-write" : fair ? "fair" : "non-fair", procs, threads, seconds);
    printf("  holds %llu (%.0f/s), writes accepted %llu, refused by the fence (a holder that had "
           "lost its hold: paused past its lease, or wiped) %llu\n",
           (unsigned long long)n, n / seconds, (unsigned long long)accepted,
           (unsigned long long)sh->rejected);
    printf("  faults injected:");
    for (int f = 0; f < F_COUNT; f++)
        if (enabled[f]) printf(" %s %u", fault_names[f], injected[f]);
    printf("\n  overlapping read-modify-writes %llu (and %llu within a lease of a wipe, which "
           "the README allows), lost updates %lld\n",
           (unsigned long long)overlaps, (unsigned long long)allowed, (long long)lost);
    if (rw) {
        uint64_t writes = 0, lost_holds = 0;
        for (uint64_t i = 0; i < n; i++) {
            writes += (uint64_t)sh->holds[i].writer;
            lost_holds += (uint64_t)sh->holds[i].lost;
        }
        printf("  read-write: %llu reads, %llu writes; a writer beside anybody, a reader that saw "
               "the counter move, a conflict in the live counters: %llu (and %llu beside a hold "
               "that was lost and told so: %llu holds lost); failed fence calls %llu\n",
               (unsigned long long)(n - writes), (unsigned long long)writes,
               (unsigned long long)rw_bad, (unsigned long long)rw_excused,
               (unsigned long long)lost_holds, (unsigned long long)atomic_load(&sh->fence_errors));
    }
    printf("  longest time without an acquisition %.0f ms\n", longest_gap / 1e6);
    printf("  errors:");
    int any = 0;
    for (int e = 0; e < MAX_ERRNO; e++)
        if (atomic_load(&sh->errors[e])) {
            printf(" %s %llu", e ? strerrorname_np(e) : "other",
                   (unsigned long long)atomic_load(&sh->errors[e]));
            any = 1;
        }
    printf("%s\n", any ? "" : " none");
    /* A wipe may cost updates (two holders); only then are they allowed. */
    int ok = overlaps == 0 && rw_bad == 0 && (lost == 0 || (lost <= (int64_t)allowed && nwipes)) && n > 0;
    printf("  %s\n", ok ? "OK: no overlap, no lost update" : "VIOLATION");
    fflush(stdout);
    return ok ? 0 : 1;
}

/* ---- main -------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: rmutex_faults --redis-server PATH [--seconds N] [--kind nonfair|fair|rwlock]\n"
                    "                     [--procs P] [--threads T] [--faults a,b,...]\n"
                    "faults: kill-cmd kill-sub pause sleep stall restart wipe kill9 stop blackhole "
                    "(default: all)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double seconds = 30;
    const char *faults = "kill-cmd,kill-sub,pause,sleep,restart,wipe,kill9,stop,blackhole";
    snprintf(server_bin, sizeof server_bin, "redis-server");
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(argv[i], "--redis-server")) snprintf(server_bin, sizeof server_bin, "%s", v);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(v);
        else if (!strcmp(argv[i], "--kind")) fair = !strcmp(v, "fair"), rw = !strcmp(v, "rwlock");
        else if (!strcmp(argv[i], "--procs")) procs = atoi(v);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(v);
        else if (!strcmp(argv[i], "--faults")) faults = v;
        else usage();
        i++;
    }
    if (procs < 1 || procs > MAX_PROCS || threads < 1 || threads > 16 || seconds <= 0) usage();
    for (int f = 0; f < F_COUNT; f++) {
        const char *p = strstr(faults, fault_names[f]);
        size_t n = strlen(fault_names[f]);
        enabled[f] = p && (p == faults || p[-1] == ',') && (p[n] == ',' || p[n] == 0);
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 2;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->store, &ma);
    snprintf(dir, sizeof dir, "/tmp/rmutex-faults.XXXXXX");
    /* A port found free can be taken by another test before the server
     * binds it: the server then exits, and another port is tried. */
    int started = -1;
    if (mkdtemp(dir))
        for (int tries = 0; tries < 3 && started; tries++)
            if ((port = free_port()) >= 0) started = server_start();
    if (started) {
        fprintf(stderr, "faults: cannot start %s\n", server_bin);
        return 2;
    }
    pthread_t proxy;
    if ((proxy_fd = listen_on(&proxy_port)) < 0 || pthread_create(&proxy, NULL, proxy_main, NULL)) {
        fprintf(stderr, "faults: cannot start the proxy\n");
        return 2;
    }
    snprintf(url, sizeof url,
             "redis://127.0.0.1:%d?lease=%d&waiter_lease=%d&command_timeout=%d&connect_timeout=%d",
             proxy_port, LEASE_MS, WAITER_LEASE_MS, COMMAND_TIMEOUT_MS, COMMAND_TIMEOUT_MS);
    setenv("RMUTEX_URL", url, 1);
    snprintf(lock_name, sizeof lock_name, "faults:%s:%d", rw ? "rwlock" : fair ? "fair" : "nonfair",
             (int)getpid());
    for (int i = 0; i < procs; i++) workers[i] = spawn_worker(i);

    int64_t end = now_ns() + (int64_t)(seconds * 1e9);
    unsigned turn = (unsigned)rand();
    while (now_ns() < end) {
        sleep_ms(1000 + rand() % 1500);
        int choices[F_COUNT], n = 0;
        for (int f = 0; f < F_COUNT; f++)
            if (enabled[f]) choices[n++] = f;
        /* In turn, from a random start: a short run meets every fault. */
        if (n && now_ns() < end) inject(choices[turn++ % (unsigned)n]);
    }
    atomic_store(&sh->stop, 1);
    /* Let the workers finish their current call (a waiter may wait for a
     * lease), then make sure none is left. */
    for (int i = 0; i < procs; i++) {
        int done = 0;
        for (int t = 0; t < 400 && !done; t++) {
            done = waitpid(workers[i], NULL, WNOHANG) == workers[i];
            if (!done) sleep_ms(50);
        }
        if (!done) {
            kill(workers[i], SIGKILL);
            waitpid(workers[i], NULL, 0);
        }
    }
    atomic_store(&proxy_stop, 1);
    pthread_join(proxy, NULL);
    server_stop();
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm)) {}
    return check(seconds);
}
