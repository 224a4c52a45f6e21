/* counter.c -- N processes add to one counter under one rmutex.
 *
 * The counter is a number in a plain file.  Each increment reads it, sleeps
 * a little and writes it back plus one: without a lock, processes overwrite
 * each other's updates; with the rmutex around it, none is lost.
 *
 *   counter [--procs N] [--iters K] [--sleep-us U] [--name LOCK] [--no-lock]
 *
 *   $ RMUTEX_URL=redis://127.0.0.1:6379 ./counter --procs 4 --iters 50
 *   $ ./counter --procs 4 --iters 50 --no-lock     # shows lost updates
 *
 * The Redis server comes from RMUTEX_URL (default redis://127.0.0.1:6379);
 * scripts/demo.sh starts one and runs this for you.  Exit status: 0 when the
 * total is exact (or, with --no-lock, always 0), 1 when updates were lost
 * under the lock, 2 on errors.
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

static void die(const char *what, int rc)
{
    fprintf(stderr, "counter: %s: %s (%s)\n", what, strerror(rc), rmutex_detail());
    exit(2);
}

static long read_counter(int fd)
{
    char buf[32] = {0};
    if (pread(fd, buf, sizeof buf - 1, 0) < 0) {
        perror("counter: pread");
        exit(2);
    }
    return strtol(buf, NULL, 10);
}

static void write_counter(int fd, long value)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%-20ld\n", value); /* fixed width */
    if (pwrite(fd, buf, (size_t)n, 0) != n) {
        perror("counter: pwrite");
        exit(2);
    }
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One child process: K increments of the shared file, each under the lock. */
static void child(int id, rmutex_t *lock, const char *path, int iters, long sleep_us_,
                  int use_lock)
{
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        perror("counter: open");
        exit(2);
    }
    for (int i = 0; i < iters; i++) {
        int rc;
        if (use_lock && (rc = rmutex_lock(lock)) != 0)
            die("rmutex_lock", rc);

        long v = read_counter(fd); /* the critical section: read ... */
        sleep_us(sleep_us_);       /* ... take our time ...          */
        write_counter(fd, v + 1);  /* ... write back                 */

        if (use_lock && (rc = rmutex_unlock(lock)) != 0)
            die("rmutex_unlock", rc);
        sleep_us(sleep_us_); /* other work, outside the lock */
    }
    close(fd);

    rmutex_stats_t st; /* this process's counters */
    int rc = rmutex_stats(&st, sizeof st);
    if (rc != 0)
        die("rmutex_stats", rc);
    if (use_lock)
        printf("  process %d (pid %ld): %d increments, %llu of them had to wait\n", id,
               (long)getpid(), iters, (unsigned long long)st.contended);
    else
        printf("  process %d (pid %ld): %d increments\n", id, (long)getpid(), iters);
    fflush(stdout);
    if ((rc = rmutex_destroy(lock)) != 0)
        die("rmutex_destroy", rc);
    exit(0); /* normal exit: the library stops its threads */
}

int main(int argc, char **argv)
{
    int procs = 4, iters = 50, use_lock = 1;
    long sleep_us_ = 1000;
    const char *name = "rmutex-example:counter";

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--procs") && i + 1 < argc)
            procs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sleep-us") && i + 1 < argc)
            sleep_us_ = atol(argv[++i]);
        else if (!strcmp(argv[i], "--name") && i + 1 < argc)
            name = argv[++i];
        else if (!strcmp(argv[i], "--no-lock"))
            use_lock = 0;
        else {
            fprintf(stderr, "usage: %s [--procs N] [--iters K] [--sleep-us U] "
                            "[--name LOCK] [--no-lock]\n", argv[0]);
            return 2;
        }
    }
    if (procs < 1 || iters < 1 || sleep_us_ < 0) {
        fprintf(stderr, "counter: --procs and --iters must be positive\n");
        return 2;
    }

    /* The shared counter: a file in a fresh temp dir, starting at 0. */
    char dir[] = "/tmp/rmutex-counter.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("counter: mkdtemp");
        return 2;
    }
    char path[64];
    snprintf(path, sizeof path, "%s/counter", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror("counter: open");
        return 2;
    }
    write_counter(fd, 0);

    /* NULL: take the server from RMUTEX_URL.  The children inherit it, and
     * the mutex too: no Redis round trip happens before the first lock. */
    int rc = rmutex_configure(NULL);
    if (rc != 0)
        die("rmutex_configure", rc);
    rmutex_t lock;
    if ((rc = rmutex_init(&lock, name, NULL)) != 0)
        die("rmutex_init", rc);

    printf("counter: %d processes x %d increments, %s\n", procs, iters,
           use_lock ? "under the rmutex" : "WITHOUT a lock");
    fflush(stdout);
    for (int p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("counter: fork");
            return 2;
        }
        if (pid == 0)
            child(p + 1, &lock, path, iters, sleep_us_, use_lock);
    }

    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;

    long total = read_counter(fd), expected = (long)procs * iters;
    close(fd);
    unlink(path);
    rmdir(dir);
    if ((rc = rmutex_destroy(&lock)) != 0)
        die("rmutex_destroy", rc);

    printf("counter: total %ld, expected %ld", total, expected);
    if (total == expected)
        printf(" -- exact\n");
    else
        printf(" -- %ld updates lost\n", expected - total);
    if (failed) {
        fprintf(stderr, "counter: a child process failed\n");
        return 2;
    }
    if (!use_lock)
        return 0;
    return total == expected ? 0 : 1;
}
