/* run.c -- rmutex run: a command under a distributed lock (flock(1) for
 * many machines).
 *
 * DESIGN
 * ------
 * cmd_run goes through its phases in order, one function each:
 * 1. parse(), open_lock(), acquire(): take the lock in this process
 *    (trylock for -n and -w 0, a CLOCK_MONOTONIC clocklock for -w, lock
 *    otherwise): a mutex, or with -s / -x a read-write lock's read or
 *    write lock (struct held: flock's shared and exclusive locks; several
 *    -s runs share NAME, a -x run has it alone).  A conflict or a timeout exits with the -E code; Redis
 *    unreachable when the wait ends, 69; a refused login, 77 at once (see
 *    common.c, which also tells outages while we wait, even without -w).
 * 2. start_command(): block the signals we forward in the main thread (the
 *    library's threads block everything) and read them from a signalfd;
 *    fork; the child makes its own process group, asks for SIGKILL when we
 *    die (PR_SET_PDEATHSIG, checked against a parent that died first) and
 *    execs the command with RMUTEX_LOCK, RMUTEX_FENCE, RMUTEX_OWNER,
 *    RMUTEX_LEASE_MS and RMUTEX_HELD in its environment.  When it cannot,
 *    it sends its errno down a close-on-exec pipe, which we read before
 *    going on (nothing: the exec worked), to say so in flock's words, and
 *    exits 127 (not found) or 126.  We become a subreaper, so the
 *    command's orphans are reaped.
 * 3. run_and_watch(): while the command runs, TERM, INT, HUP, QUIT, USR1,
 *    USR2, WINCH and CONT go to its group; a second TERM or INT kills the
 *    group.  Every 100 ms, and at once when the watchdog reports the hold
 *    lost, look at rmutex_hold_deadline(): the moment the hold is known
 *    good until (the last renewal Redis acknowledged, plus the lease).  If
 *    the hold is gone, signal the group now; if renewals are failing,
 *    signal it at deadline - margin - grace and kill it at deadline -
 *    margin, so the command is dead before Redis can give the lock to
 *    anyone else (margin = 250 ms + 1 % of the lease, for clock rates).
 *    The lease and the grace must leave the renewals room: lease - grace -
 *    margin > 1.2 * lease / 3, else usage error (lease_in_force()).
 *    --on-lost ignore only says it and lets the command go on.  -s and -x
 *    watch the read-write lock's hold the same way (rrwlock_hold_deadline:
 *    the writer's lease, or the process's read lease).  --max-time
 *    signals the group too (exit 124).
 * 4. release_and_report(): when the command ends, unlock (not after a loss
 *    we stopped it for) and exit with its status (128 + N for a signal),
 *    124 after --max-time, or 75 after a loss -- also with --on-lost
 *    ignore, and also a loss found only at the release, the command having
 *    ended: the exit status is where a cron job or a script learns that the
 *    command did not run alone to its end.  Then the command's own status
 *    is said on stderr. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { LOST_TERM, LOST_KILL, LOST_IGNORE };

/* The lock: a mutex (the default), a read-write lock taken shared (-s)
 * or exclusive (-x, -e), or one permit of a semaphore (--permits N). */
enum { MUTEX, SHARED, EXCLUSIVE, PERMIT };

struct run {
    const char *name, *shell_cmd;
    char **cmd;
    int kind, nonblock, has_timeout, conflict, fair, robust, on_lost, help;
    unsigned permits;
    int64_t timeout_ns, lease_ns, max_ns, grace_ns;
};

/* What is held: the mutex, the read-write lock, or a permit. */
struct held {
    int kind;
    rmutex_t m;
    rrwlock_t rw;
    rsem_t sem;
};

static int held_try(struct held *h)
{
    if (h->kind == PERMIT) return rsem_trywait(&h->sem);
    if (h->kind == MUTEX) return rmutex_trylock(&h->m);
    return h->kind == SHARED ? rrwlock_tryrdlock(&h->rw) : rrwlock_trywrlock(&h->rw);
}

static int held_until(struct held *h, const struct timespec *mono)
{
    if (h->kind == PERMIT) return rsem_clockwait(&h->sem, CLOCK_MONOTONIC, mono);
    if (h->kind == MUTEX) return rmutex_clocklock(&h->m, CLOCK_MONOTONIC, mono);
    return h->kind == SHARED ? rrwlock_clockrdlock(&h->rw, CLOCK_MONOTONIC, mono)
                             : rrwlock_clockwrlock(&h->rw, CLOCK_MONOTONIC, mono);
}

static int held_forever(struct held *h)
{
    if (h->kind == PERMIT) return rsem_wait(&h->sem);
    if (h->kind == MUTEX) return rmutex_lock(&h->m);
    return h->kind == SHARED ? rrwlock_rdlock(&h->rw) : rrwlock_wrlock(&h->rw);
}

static int held_unlock(struct held *h)
{
    if (h->kind == PERMIT) return rsem_post(&h->sem);
    return h->kind == MUTEX ? rmutex_unlock(&h->m) : rrwlock_unlock(&h->rw);
}

/* Until when the hold is known good (CLOCK_MONOTONIC): 0, or EPERM when
 * it is gone. */
static int held_deadline(struct held *h, struct timespec *d)
{
    if (h->kind == PERMIT) return rsem_hold_deadline(&h->sem, d);
    return h->kind == MUTEX ? rmutex_hold_deadline(&h->m, d) : rrwlock_hold_deadline(&h->rw, d);
}

/* The fencing token: the mutex's or the writer's (a reader or a permit
 * has none: 0). */
static void held_fence(struct held *h, uint64_t *token)
{
    if (h->kind == MUTEX) rmutex_fence(&h->m, token);
    else if (h->kind == EXCLUSIVE) rrwlock_fence(&h->rw, token);
}

static int lost_fd = -1;

static void on_lost(rmutex_t *m, const char *name, void *arg)
{
    (void)m, (void)name, (void)arg;
    uint64_t one = 1;
    if (lost_fd >= 0 && write(lost_fd, &one, sizeof one) < 0) {
        /* the 100 ms look finds it anyway */
    }
}

static void usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] run [OPTIONS] NAME [--] COMMAND [ARG...]\n"
          "       rmutex [GLOBAL OPTIONS] run [OPTIONS] NAME -c 'SHELL COMMAND'\n"
          "Run COMMAND while holding the lock NAME in Redis (flock(1) for many machines).\n"
          "  -n, --nb, --nonblock         fail at once when the lock is held (exit: the -E code)\n"
          "  -w, --wait, --timeout DUR    wait at most DUR (exit: the -E code); -w 0 is -n\n"
          "  -E, --conflict-exit-code N   the exit code of a conflict or timeout (default 1)\n"
          "  -c, --command CMD            run CMD with $SHELL -c\n"
          "  -v, --verbose                say how long the lock took, and what runs\n"
          "      --fair                   a fair lock: waiters are served in order\n"
          "      --lease DUR              the lease renewed while the command runs (30s)\n"
          "      --robust                 a robust lock (RMUTEX_PREV_OWNER_DIED=1 after a dead holder)\n"
          "      --max-time DUR           stop the command after DUR (exit 124)\n"
          "      --kill-after, --grace DUR  from the first signal to SIGKILL (5s)\n"
          "      --on-lost term|kill|ignore  a lost lock: TERM then KILL the command (default),\n"
          "                               KILL it, or let it end; the exit is 75 in every case\n"
          "  -s, --shared                 a read lock of the read-write lock NAME: shared with\n"
          "                               other -s runs, excluded by a -x one\n"
          "  -x, -e, --exclusive          the write lock of the read-write lock NAME\n"
          "                               (without -s or -x: NAME is a mutex)\n"
          "      --permits N              one of N permits of the semaphore NAME: at most N\n"
          "                               runs at once (N: the semaphore's value when new)\n"
          "  -o, --close                  accepted for flock's sake\n"
          "DUR: seconds (1.5) or with a unit: 500ms, 30s, 2m, 1h.\n"
          "Exit: the command's status (128+N: killed by signal N); the -E code; 75 the lock was\n"
          "lost; 124 --max-time; 126 cannot execute; 127 not found; 64 usage; 69 Redis\n"
          "unreachable; 76 a Redis error; 77 login or ACL refused.  See rmutex(1).\n",
          f);
}

static int usage_error(const char *msg)
{
    err("run: %s", msg);
    return EXIT_USAGE;
}

static int parse(int argc, char **argv, struct run *o)
{
    memset(o, 0, sizeof *o);
    o->conflict = 1;
    o->grace_ns = 5000000000LL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t ns;
        if (!strcmp(a, "--")) {
            break;
        } else if (wants_help(a)) {
            o->help = 1;
            return 0;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--nb") || !strcmp(a, "--nonblock")) {
            o->nonblock = 1;
        } else if (!strcmp(a, "-w") || !strcmp(a, "--wait") || !strcmp(a, "--timeout")) {
            if (parse_duration(v, &ns)) return usage_error("-w takes a duration (1.5, 500ms, 2m)");
            o->has_timeout = 1;
            o->timeout_ns = ns;
            i++;
        } else if (!strcmp(a, "-E") || !strcmp(a, "--conflict-exit-code")) {
            char *end;
            long n = v ? strtol(v, &end, 10) : -1;
            if (!v || *end || n < 0 || n > 255) return usage_error("-E takes a number in 0..255");
            o->conflict = (int)n;
            i++;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--command")) {
            if (!v) return usage_error("-c takes a shell command");
            o->shell_cmd = v;
            i++;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            g.verbose = 1;
        } else if (!strcmp(a, "-x") || !strcmp(a, "-e") || !strcmp(a, "--exclusive")) {
            o->kind = EXCLUSIVE;
        } else if (!strcmp(a, "-s") || !strcmp(a, "--shared")) {
            o->kind = SHARED;
        } else if (!strcmp(a, "--permits")) {
            char *end;
            long n = v ? strtol(v, &end, 10) : -1;
            if (!v || *end || n < 1 || n > (long)RSEM_VALUE_MAX)
                return usage_error("--permits takes a number of at least 1");
            o->kind = PERMIT;
            o->permits = (unsigned)n;
            i++;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--close")) {
            say("run: -o has no meaning without a lock file descriptor; ignored");
        } else if (!strcmp(a, "--fair")) {
            o->fair = 1;
        } else if (!strcmp(a, "--robust")) {
            o->robust = 1;
        } else if (!strcmp(a, "--lease")) {
            if (parse_duration(v, &ns) || ns < 1000000000LL)
                return usage_error("--lease takes a duration of at least 1 s");
            o->lease_ns = ns;
            i++;
        } else if (!strcmp(a, "--max-time")) {
            if (parse_duration(v, &ns) || ns <= 0) return usage_error("--max-time takes a duration");
            o->max_ns = ns;
            i++;
        } else if (!strcmp(a, "--kill-after") || !strcmp(a, "--grace")) {
            if (parse_duration(v, &ns)) return usage_error("--kill-after takes a duration");
            o->grace_ns = ns;
            i++;
        } else if (!strcmp(a, "--on-lost")) {
            if (v && !strcmp(v, "term")) o->on_lost = LOST_TERM;
            else if (v && !strcmp(v, "kill")) o->on_lost = LOST_KILL;
            else if (v && !strcmp(v, "ignore")) o->on_lost = LOST_IGNORE;
            else return usage_error("--on-lost takes term, kill or ignore");
            i++;
        } else {
            err("run: unknown option %s", a);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) return usage_error("a lock name is needed");
    o->name = argv[i++];
    if (i < argc && (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--command"))) {
        if (i + 1 >= argc) return usage_error("-c takes a shell command");
        o->shell_cmd = argv[i + 1];
        i += 2;
    }
    if (i < argc && !strcmp(argv[i], "--")) i++;
    if (o->shell_cmd && i < argc) return usage_error("-c and a command: give one");
    if (!o->shell_cmd && i >= argc) return usage_error("no command to run");
    o->cmd = argv + i;
    if (o->has_timeout && o->timeout_ns == 0) o->nonblock = 1; /* flock: -w 0 is -n */
    if (o->fair && (o->kind == SHARED || o->kind == EXCLUSIVE))
        return usage_error("--fair is for a mutex or --permits: a read-write lock serves in order already");
    if (o->robust && o->kind == PERMIT)
        return usage_error("--robust is for locks: a dead run's permit simply comes back");
    return 0;
}

/* The hold's margin for clock rates: 250 ms + 1 % of the lease. */
static int64_t margin_of(int64_t lease_ns) { return 250000000LL + lease_ns / 100; }

/* Whether lease leaves the renewals room before the command must be
 * signalled: lease - grace - margin > 1.2 x lease/3 (the renewal period
 * with a fifth to spare).  Says why not. */
static int room(const struct run *o, int64_t lease)
{
    int64_t margin = margin_of(lease);
    if (o->on_lost == LOST_IGNORE || lease - o->grace_ns - margin > lease * 12 / 30) return 1;
    err("run: a lease of %lld ms leaves no room for --kill-after %lld ms and a margin of %lld ms "
        "(lease - grace - margin must exceed 1.2 x lease/3): a longer --lease or a shorter "
        "--kill-after",
        (long long)(lease / 1000000), (long long)(o->grace_ns / 1000000),
        (long long)(margin / 1000000));
    return 0;
}

/* environ with our variables set (replacing inherited ones). */
static char **child_env(const char *name, uint64_t fence, const char *owner, int64_t lease_ns,
                        int owner_died)
{
    static const char *const ours[] = { "RMUTEX_LOCK=", "RMUTEX_FENCE=", "RMUTEX_OWNER=",
                                        "RMUTEX_LEASE_MS=", "RMUTEX_HELD=",
                                        "RMUTEX_PREV_OWNER_DIED=" };
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 8, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int skip = 0;
        for (size_t j = 0; j < sizeof ours / sizeof *ours; j++)
            if (!strncmp(environ[i], ours[j], strlen(ours[j]))) skip = 1;
        if (!skip) env[k++] = environ[i];
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "RMUTEX_LOCK=%s", name);
    env[k++] = strdup(buf);
    snprintf(buf, sizeof buf, "RMUTEX_FENCE=%llu", (unsigned long long)fence);
    env[k++] = strdup(buf);
    snprintf(buf, sizeof buf, "RMUTEX_OWNER=%s", owner);
    env[k++] = strdup(buf);
    snprintf(buf, sizeof buf, "RMUTEX_LEASE_MS=%lld", (long long)(lease_ns / 1000000));
    env[k++] = strdup(buf);
    env[k++] = strdup("RMUTEX_HELD=1");
    if (owner_died) env[k++] = strdup("RMUTEX_PREV_OWNER_DIED=1");
    return env;
}

/* Free what child_env() added (the inherited entries are environ's). */
static void env_free(char **env)
{
    if (!env) return;
    for (char **e = env; *e; e++) {
        int inherited = 0;
        for (char **x = environ; *x && !inherited; x++) inherited = *x == *e;
        if (!inherited) free(*e);
    }
    free(env);
}

/* What the waiting line calls the queue the command waits in, if any. */
static const char *queue_word(const struct run *o)
{
    if (o->kind == PERMIT) return o->fair ? "fair" : NULL;
    return o->kind != MUTEX ? "queue" : o->fair ? "fair" : NULL;
}

/* Take the lock as o asks: 1 with it held, else 0 and *code the exit code
 * (which may be 0: -E 0). */
static int acquire(const struct run *o, struct held *h, int *owner_died, int *code)
{
    int64_t t0 = mono_ns();
    int r;
    struct progress *prog;
    if (o->nonblock) {
        r = held_try(h);
        if (r == EBUSY) {
            if (g.verbose) err("failed to get lock");
            *code = o->conflict;
            return 0;
        }
    } else if (o->has_timeout) {
        int64_t at = t0 + o->timeout_ns;
        struct timespec ts = { (time_t)(at / 1000000000), (long)(at % 1000000000) };
        prog = progress_start(o->name, queue_word(o));
        r = held_until(h, &ts);
        progress_stop(prog);
        if (r == ETIMEDOUT && !redis_down()) {
            if (g.verbose) err("timeout while waiting to get lock");
            *code = o->conflict;
            return 0;
        }
    } else {
        prog = progress_start(o->name, queue_word(o));
        r = held_forever(h);
        progress_stop(prog);
    }
    if (r && r != EOWNERDEAD) {
        *code = redis_failed("run", o->name, r == ETIMEDOUT ? EAGAIN : r);
        return 0;
    }
    *owner_died = r == EOWNERDEAD;
    if (g.verbose) {
        int64_t took = mono_ns() - t0;
        printf("rmutex: getting lock took %lld.%06lld seconds\n", (long long)(took / 1000000000),
               (long long)(took % 1000000000 / 1000));
        fflush(stdout);
    }
    return 1;
}

/* Fork and exec argv.  An exec that fails sends its errno down report
 * (close-on-exec: the parent reads nothing when the exec worked). */
static pid_t start(char **argv, char **env, int report)
{
    if (g.verbose) {
        printf("rmutex: executing %s\n", argv[0]);
        fflush(stdout);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    /* The child: async-signal-safe calls only, up to exec. */
    sigset_t none;
    sigemptyset(&none);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(EXIT_LOST); /* we died before the line above */
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    execvpe(argv[0], argv, env);
    int e = errno;
    if (write(report, &e, sizeof e) < 0) { /* the exit status still tells */ }
    _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

/* Tell an exec that failed, in flock's words ("failed to execute CMD:
 * why"); the child exits 126 or 127 by itself. */
static void tell_exec_failure(const char *cmd, int report)
{
    int e;
    ssize_t n;
    while ((n = read(report, &e, sizeof e)) < 0 && errno == EINTR) {
    }
    if (n == (ssize_t)sizeof e) err("failed to execute %s: %s", cmd, strerror(e));
}

/* The exit status of a wait(2) status, as a shell reports it. */
static int status_of(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return EXIT_OSERR;
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

/* Configure the library as o asks and make the lock.  0 or an exit code. */
static int open_lock(const struct run *o, struct held *h)
{
    int r;
    if ((r = configure())) return r;
    if (o->lease_ns && rmutex_set_default_lease((unsigned long)(o->lease_ns / 1000000))) {
        err("run: --lease: %s", rmutex_detail());
        return EXIT_USAGE;
    }
    if (o->lease_ns && !room(o, o->lease_ns)) return EXIT_USAGE; /* (a URL's lease=: later) */
    if (!o->nonblock) report_outages(); /* (-n: its one try says why it failed) */

    h->kind = o->kind;
    if (o->kind == PERMIT) {
        rsemattr_t sa;
        rsemattr_init(&sa);
        rsemattr_setfair(&sa, o->fair);
        r = rsem_init(&h->sem, o->name, o->permits, &sa);
        rsemattr_destroy(&sa);
    } else if (o->kind != MUTEX) {
        rrwlockattr_t ra;
        rrwlockattr_init(&ra);
        rrwlockattr_setrobust(&ra, o->robust ? RMUTEX_ROBUST : RMUTEX_STALLED);
        r = rrwlock_init(&h->rw, o->name, &ra);
        rrwlockattr_destroy(&ra);
    } else {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_settype(&a, RMUTEX_ERRORCHECK);
        rmutexattr_setfair(&a, o->fair);
        rmutexattr_setrobust(&a, o->robust ? RMUTEX_ROBUST : RMUTEX_STALLED);
        r = rmutex_init(&h->m, o->name, &a);
        rmutexattr_destroy(&a);
    }
    if (r) {
        err("run: %s", rmutex_detail());
        return EXIT_USAGE;
    }
    return 0;
}

/* The lease really in force, once held: --lease, else what the hold's
 * deadline shows right after the acquisition (at most one lease ahead;
 * a URL's lease= counts).  0 when it leaves the renewals no room. */
static int64_t lease_in_force(const struct run *o, struct held *h)
{
    int64_t lease = o->lease_ns ? o->lease_ns : 30000000000LL;
    struct timespec d;
    if (!o->lease_ns && !held_deadline(h, &d)) {
        int64_t left = ns_of(d) - mono_ns();
        if (left > 0) lease = left + 50000000; /* rounded up by the call's time */
    }
    return room(o, lease) ? lease : 0;
}

/* The command under watch. */
struct watch {
    pid_t child;
    int sfd;                  /* the forwarded signals and SIGCHLD */
    int64_t lease, margin;
    int owner_died;           /* acquired with EOWNERDEAD (--robust) */
    int64_t started, kill_at; /* kill_at: SIGKILL the group then (0: no) */
    int terms;                /* TERMs and INTs forwarded */
    int lost;                 /* the hold was lost, or its deadline came */
    int lapsed;               /* (which: its deadline came, renewals failing) */
    int timed_out;            /* --max-time */
    int status;               /* the command's wait status, -1 while it runs */
};

/* Block the signals we forward and read them from a signalfd, set up the
 * lost-hold wake-up, fork and exec the command with its environment.  0
 * or an exit code (the lock released). */
static int start_command(const struct run *o, struct held *h, struct watch *w)
{
    uint64_t fence = 0;
    char owner[64] = "";
    held_fence(h, &fence);
    rmutex_owner_id(owner, sizeof owner);
    char **env = child_env(o->name, fence, owner, w->lease, w->owner_died);

    sigset_t fwd;
    sigemptyset(&fwd);
    int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT };
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++) sigaddset(&fwd, forwarded[i]);
    sigaddset(&fwd, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &fwd, NULL);
    w->sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
    lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int report[2] = { -1, -1 };
    if (!env || w->sfd < 0 || lost_fd < 0 || pipe2(report, O_CLOEXEC)) {
        err("run: %s", strerror(errno));
        held_unlock(h);
        env_free(env);
        return EXIT_OSERR;
    }
    rmutex_set_lost_callback(on_lost, NULL);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    report_outages(); /* (-n: from now on) */

    char *sh_argv[4], **argv = o->cmd;
    if (o->shell_cmd) {
        const char *shell = getenv("SHELL");
        sh_argv[0] = (char *)(shell && *shell ? shell : "/bin/sh");
        sh_argv[1] = (char *)"-c";
        sh_argv[2] = (char *)o->shell_cmd;
        sh_argv[3] = NULL;
        argv = sh_argv;
    }
    w->child = start(argv, env, report[1]);
    int fork_errno = errno;
    close(report[1]);
    env_free(env); /* (the child has its copy) */
    if (w->child < 0) {
        close(report[0]);
        err("run: fork: %s", strerror(fork_errno));
        held_unlock(h);
        return EXIT_OSERR;
    }
    setpgid(w->child, w->child); /* (also done by the child: whoever is first) */
    tell_exec_failure(argv[0], report[0]);
    close(report[0]);
    w->started = mono_ns();
    w->status = -1;
    return 0;
}

/* Forward what came on the signalfd; a second TERM or INT kills. */
static void forward_signals(struct watch *w)
{
    struct signalfd_siginfo si;
    while (read(w->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) continue; /* reaped apart */
        kill(-w->child, sig);
        if ((sig == SIGTERM || sig == SIGINT) && ++w->terms >= 2) kill(-w->child, SIGKILL);
    }
}

/* Reap the command, and any orphan of its that came to us. */
static void reap(struct watch *w)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0) break;
        if (p == w->child) w->status = st;
    }
}

/* Look at the hold: signal the command when it is gone or its deadline
 * comes near, as --on-lost says. */
static void watch_hold(const struct run *o, struct held *h, struct watch *w, int64_t now)
{
    struct timespec d = { INT64_MAX / 1000000000 - 1, 0 };
    int r = held_deadline(h, &d);
    int64_t dl = ns_of(d);
    int gone = r == EPERM;
    if (o->on_lost == LOST_IGNORE) {
        if (!w->lost && (gone || now >= dl - w->margin)) {
            w->lost = 1;
            w->lapsed = !gone;
            say("run: %s: %s; the command goes on (--on-lost ignore)", o->name,
                gone ? "the lock was lost" : "Redis has not acknowledged a renewal in time");
        }
        return;
    }
    int hard = gone ? o->on_lost == LOST_KILL || o->grace_ns == 0 : now >= dl - w->margin;
    int soft = gone || now >= dl - w->margin - o->grace_ns;
    if ((soft || hard) && !w->lost) {
        w->lost = 1;
        say("run: %s: %s; stopping the command", o->name,
            gone ? "the lock was lost" : "Redis has not acknowledged a renewal in time");
        kill(-w->child, hard || o->on_lost == LOST_KILL ? SIGKILL : SIGTERM);
        w->kill_at = gone ? now + o->grace_ns : dl - w->margin;
        if (w->kill_at > now + o->grace_ns) w->kill_at = now + o->grace_ns;
    }
    if (!gone && w->lost && now >= dl - w->margin) kill(-w->child, SIGKILL);
}

/* Until the command ends: forward signals, watch the hold, --max-time. */
static void run_and_watch(const struct run *o, struct held *h, struct watch *w)
{
    while (w->status < 0) {
        struct pollfd p[2] = { { w->sfd, POLLIN, 0 }, { lost_fd, POLLIN, 0 } };
        int n = poll(p, 2, 100);
        if (n < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(lost_fd, &v, sizeof v) < 0) { /* nothing: it is a hint */ }
        }
        if (p[0].revents & POLLIN) forward_signals(w);
        reap(w);
        if (w->status >= 0) break;

        int64_t now = mono_ns();
        watch_hold(o, h, w, now);
        if (o->max_ns && !w->timed_out && now - w->started >= o->max_ns) {
            w->timed_out = 1;
            if (g.verbose) say("run: --max-time reached; stopping the command");
            kill(-w->child, SIGTERM);
            if (!w->kill_at || w->kill_at > now + o->grace_ns) w->kill_at = now + o->grace_ns;
        }
        if (w->kill_at && now >= w->kill_at) kill(-w->child, SIGKILL);
    }
}

/* Release the lock and choose the exit status: 75 after a loss, whether
 * the command was stopped for it, let go on (--on-lost ignore) or had
 * ended before the loss was found (at the release); then the command's
 * own status, which would be lost, is said. */
static int release_and_report(const struct run *o, struct held *h, const struct watch *w)
{
    int status = status_of(w->status);
    if (w->lost && o->on_lost != LOST_IGNORE) {
        held_unlock(h); /* EPERM when gone: it only ends the local hold */
        return EXIT_LOST;
    }
    if (o->robust && w->owner_died && status == 0 && h->kind == MUTEX) rmutex_consistent(&h->m);
    int r = held_unlock(h);
    if (w->lost) {
        say("run: %s: the command's status was %d; %s while it ran", o->name, status,
            w->lapsed ? "Redis did not acknowledge a renewal in time" : "the lock was lost");
        return EXIT_LOST;
    }
    if (r == EPERM) {
        say("run: %s: the lock was lost under the command (found at its release: %s); the "
            "command's status was %d",
            o->name, rmutex_detail(), status);
        return EXIT_LOST;
    }
    if (w->timed_out) return EXIT_MAXTIME;
    return status;
}

int cmd_run(int argc, char **argv)
{
    struct run o;
    struct held h;
    int r, owner_died = 0, code = 0;
    if ((r = parse(argc, argv, &o))) return r;
    if (o.help) {
        usage(stdout);
        return 0;
    }
    if ((r = open_lock(&o, &h))) return r;
    if (!acquire(&o, &h, &owner_died, &code)) return code;
    struct watch w = { .lease = lease_in_force(&o, &h), .owner_died = owner_died };
    if (!w.lease) {
        held_unlock(&h);
        return EXIT_USAGE;
    }
    w.margin = margin_of(w.lease);
    if ((r = start_command(&o, &h, &w))) return r;
    run_and_watch(&o, &h, &w);
    return release_and_report(&o, &h, &w);
}
