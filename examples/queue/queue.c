/* queue.c -- a bounded job queue shared by producer and consumer processes:
 * one rmutex and two condition variables (rcond), "not empty" and "not
 * full", exactly as a pthread program would write it with one process.
 *
 * The queue itself is a small file (a count and the job numbers): in a real
 * deployment it would be shared storage (a database row, a Redis list)
 * that the mutex guards.  Producers wait while it is full, consumers while
 * it is empty; every job must come out exactly once.
 *
 *   queue [--producers P] [--consumers C] [--jobs N] [--capacity K] [--name NAME]
 *
 *   $ RMUTEX_URL=redis://127.0.0.1:6379 ./queue --producers 2 --consumers 3 --jobs 24
 *
 * Exit status: 0 when every job was consumed exactly once, 1 when not, 2 on
 * errors.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rmutex.h>

#define MAXCAP 64

static rmutex_t lock;
static rcond_t nonempty, nonfull;
static char queue_path[256], done_path[256];

static void die(const char *what, int rc)
{
    fprintf(stderr, "queue[%d]: %s: %s (%s)\n", (int)getpid(), what, strerror(rc), rmutex_detail());
    exit(2);
}

/* The queue file: "<consumed so far> <count> <job>..." */
struct state {
    int consumed, count, jobs[MAXCAP];
};

static void load(struct state *s)
{
    FILE *f = fopen(queue_path, "r");
    memset(s, 0, sizeof *s);
    if (!f) return;
    if (fscanf(f, "%d %d", &s->consumed, &s->count) != 2) s->consumed = s->count = 0;
    for (int i = 0; i < s->count && i < MAXCAP; i++)
        if (fscanf(f, "%d", &s->jobs[i]) != 1) s->count = i;
    fclose(f);
}

static void store(const struct state *s)
{
    FILE *f = fopen(queue_path, "w");
    if (!f) die("fopen", errno);
    fprintf(f, "%d %d", s->consumed, s->count);
    for (int i = 0; i < s->count; i++) fprintf(f, " %d", s->jobs[i]);
    fprintf(f, "\n");
    fclose(f);
}

static void pause_ms(int ms)
{
    struct timespec ts = { 0, ms * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int producer(int first, int n, int cap)
{
    int waits = 0, r;
    for (int job = first; job < first + n; job++) {
        struct state s;
        if ((r = rmutex_lock(&lock))) die("rmutex_lock", r);
        for (load(&s); s.count >= cap; load(&s)) {
            waits++;
            if ((r = rcond_wait(&nonfull, &lock))) die("rcond_wait", r);
        }
        s.jobs[s.count++] = job;
        store(&s);
        if ((r = rcond_signal(&nonempty))) die("rcond_signal", r);
        if ((r = rmutex_unlock(&lock))) die("rmutex_unlock", r);
    }
    printf("  producer %d: put %d jobs, waited %d times for room\n", (int)getpid(), n, waits);
    return 0;
}

static int consumer(int total)
{
    int got = 0, waits = 0, r;
    for (;;) {
        struct state s;
        if ((r = rmutex_lock(&lock))) die("rmutex_lock", r);
        for (load(&s); s.count == 0 && s.consumed < total; load(&s)) {
            waits++;
            if ((r = rcond_wait(&nonempty, &lock))) die("rcond_wait", r);
        }
        if (s.consumed == total) { /* all done: let the other consumers see it */
            rcond_broadcast(&nonempty);
            rmutex_unlock(&lock);
            break;
        }
        int job = s.jobs[0];
        memmove(s.jobs, s.jobs + 1, sizeof s.jobs[0] * (size_t)--s.count);
        s.consumed++;
        store(&s);
        FILE *f = fopen(done_path, "a");
        if (f) {
            fprintf(f, "%d\n", job);
            fclose(f);
        }
        if ((r = rcond_signal(&nonfull))) die("rcond_signal", r);
        if ((r = rmutex_unlock(&lock))) die("rmutex_unlock", r);
        got++;
        pause_ms(5); /* the work */
    }
    printf("  consumer %d: took %d jobs, waited %d times for work\n", (int)getpid(), got, waits);
    return 0;
}

static int arg(int argc, char **argv, const char *key, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], key)) return atoi(argv[i + 1]);
    return dflt;
}

int main(int argc, char **argv)
{
    int producers = arg(argc, argv, "--producers", 2), consumers = arg(argc, argv, "--consumers", 3);
    int jobs = arg(argc, argv, "--jobs", 24), cap = arg(argc, argv, "--capacity", 3);
    const char *name = "rmutex-example:queue";
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--name")) name = argv[i + 1];
    if (producers < 1 || consumers < 1 || jobs < producers || cap < 1 || cap > MAXCAP) {
        fprintf(stderr, "usage: queue [--producers P] [--consumers C] [--jobs N] "
                        "[--capacity K<=%d] [--name NAME]\n", MAXCAP);
        return 2;
    }
    char lock_name[300], ne_name[300], nf_name[300];
    snprintf(lock_name, sizeof lock_name, "%s:lock", name);
    snprintf(ne_name, sizeof ne_name, "%s:nonempty", name);
    snprintf(nf_name, sizeof nf_name, "%s:nonfull", name);
    int r;
    if ((r = rmutex_init(&lock, lock_name, NULL))) die("rmutex_init", r);
    if ((r = rcond_init(&nonempty, ne_name, NULL)) || (r = rcond_init(&nonfull, nf_name, NULL)))
        die("rcond_init", r);

    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(queue_path, sizeof queue_path, "%s/rmutex-queue-%d", tmp, (int)getpid());
    snprintf(done_path, sizeof done_path, "%s/rmutex-queue-%d.done", tmp, (int)getpid());
    struct state empty = { 0, 0, { 0 } };
    store(&empty);
    unlink(done_path);
    printf("queue: %d jobs through a queue of %d, %d producer and %d consumer processes\n", jobs,
           cap, producers, consumers);
    fflush(stdout);

    int nproc = producers + consumers;
    for (int i = 0; i < nproc; i++) {
        pid_t pid = fork();
        if (pid < 0) die("fork", errno);
        if (pid == 0) {
            int per = jobs / producers, first = i * per;
            if (i == producers - 1) per = jobs - first;
            exit(i < producers ? producer(first, per, cap) : consumer(jobs));
        }
    }
    int failed = 0;
    for (int i = 0; i < nproc; i++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) failed = 1;
    }

    char *seen = calloc((size_t)jobs, 1);
    int dup = 0, count = 0, job;
    FILE *f = fopen(done_path, "r");
    while (seen && f && fscanf(f, "%d", &job) == 1) {
        if (job < 0 || job >= jobs || seen[job]++) dup++;
        count++;
    }
    if (f) fclose(f);
    unlink(queue_path);
    unlink(done_path);
    free(seen);
    rcond_destroy(&nonempty);
    rcond_destroy(&nonfull);
    rmutex_destroy(&lock);
    if (failed) {
        fprintf(stderr, "queue: a process failed\n");
        return 2;
    }
    int ok = count == jobs && !dup;
    printf("queue: %d of %d jobs consumed, %d twice or unknown: %s\n", count, jobs, dup,
           ok ? "every job exactly once" : "WRONG");
    return ok ? 0 : 1;
}
