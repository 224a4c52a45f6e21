/* worker_pool.c -- worker processes share out jobs, each job a named rmutex.
 *
 * Jobs are "job:1" .. "job:N".  Each worker walks the list from its own
 * starting point and claims a job with rmutex_trylock(): if another worker
 * holds it, it moves on and comes back later.  On its second pass it waits
 * for a busy job with rmutex_timedlock(), and gives up on a job that stays
 * busy too long (one job is deliberately slow).  A job is done once: under
 * its lock the worker checks for the job's "done" file before working and
 * writes it after.  Every completion is also appended to a log, which the
 * parent reads at the end to check that every job was done exactly once.
 *
 *   worker_pool [--workers W] [--jobs N] [--slow J] [--prefix P]
 *
 *   $ RMUTEX_URL=redis://127.0.0.1:6379 ./worker_pool --workers 3 --jobs 12
 *
 * The Redis server comes from RMUTEX_URL (default redis://127.0.0.1:6379);
 * scripts/demo.sh starts one and runs this for you.  Exit status: 0 when
 * every job was done exactly once, 1 when not, 2 on errors.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rmutex.h>

#define JOB_MS 150       /* an ordinary job takes this long */
#define SLOW_JOB_MS 3000 /* the slow one takes this long    */
#define PATIENCE_MS 1000 /* how long a worker waits for a busy job */

static int n_workers = 3, n_jobs = 12, slow_job = 5;
static const char *prefix = "job:";
static char dir[] = "/tmp/rmutex-pool.XXXXXX";

static void die(int worker, const char *what, int rc)
{
    fprintf(stderr, "worker %d: %s: %s (%s)\n", worker, what, strerror(rc), rmutex_detail());
    exit(2);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void done_path(char *buf, size_t size, int job)
{
    snprintf(buf, size, "%s/job-%d.done", dir, job);
}

static int is_done(int job)
{
    char path[96];
    done_path(path, sizeof path, job);
    return access(path, F_OK) == 0;
}

/* Called with job's lock held: do it unless somebody already has. */
static void run_job(int worker, int job)
{
    if (is_done(job))
        return;
    printf("worker %d: doing %s%d%s\n", worker, prefix, job, job == slow_job ? " (slow)" : "");
    fflush(stdout);
    sleep_ms(job == slow_job ? SLOW_JOB_MS : JOB_MS);

    char path[96], line[64];
    done_path(path, sizeof path, job);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || close(fd) != 0) {
        perror("worker_pool: done file");
        exit(2);
    }
    snprintf(path, sizeof path, "%s/log", dir);
    int n = snprintf(line, sizeof line, "%d %d\n", job, worker);
    fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd) != 0) {
        perror("worker_pool: log");
        exit(2);
    }
}

static void worker(int id, rmutex_t *jobs)
{
    char *busy = calloc((size_t)n_jobs + 1, 1); /* busy[job]: held by another */
    if (!busy)
        die(id, "calloc", ENOMEM);
    int rc;

    /* First pass: take whatever is free, skip what another worker holds. */
    for (int k = 0; k < n_jobs; k++) {
        int job = 1 + (k + (id - 1) * n_jobs / n_workers) % n_jobs; /* each starts elsewhere */
        if (is_done(job))
            continue;
        rc = rmutex_trylock(&jobs[job]);
        if (rc == EBUSY) {
            busy[job] = 1;
            continue;
        }
        if (rc != 0)
            die(id, "rmutex_trylock", rc);
        run_job(id, job);
        if ((rc = rmutex_unlock(&jobs[job])) != 0)
            die(id, "rmutex_unlock", rc);
    }

    /* Second pass: wait a while for the jobs that were busy. */
    for (int job = 1; job <= n_jobs; job++) {
        if (!busy[job] || is_done(job))
            continue;
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline); /* timedlock takes CLOCK_REALTIME */
        deadline.tv_sec += PATIENCE_MS / 1000;
        deadline.tv_nsec += (PATIENCE_MS % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        rc = rmutex_timedlock(&jobs[job], &deadline);
        if (rc == ETIMEDOUT) {
            printf("worker %d: gave up on %s%d after %d ms: another worker is still on it\n",
                   id, prefix, job, PATIENCE_MS);
            fflush(stdout);
            continue;
        }
        if (rc != 0)
            die(id, "rmutex_timedlock", rc);
        run_job(id, job); /* usually done by then: then it does nothing */
        if ((rc = rmutex_unlock(&jobs[job])) != 0)
            die(id, "rmutex_unlock", rc);
    }

    for (int job = 1; job <= n_jobs; job++)
        if ((rc = rmutex_destroy(&jobs[job])) != 0)
            die(id, "rmutex_destroy", rc);
    free(busy);
    exit(0);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            n_workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            n_jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--slow") && i + 1 < argc)
            slow_job = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefix") && i + 1 < argc)
            prefix = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--workers W] [--jobs N] [--slow J] [--prefix P]\n",
                    argv[0]);
            return 2;
        }
    }
    if (n_workers < 1 || n_jobs < 1 || n_jobs > 10000) {
        fprintf(stderr, "worker_pool: need 1 or more workers and 1 to 10000 jobs\n");
        return 2;
    }

    if (!mkdtemp(dir)) {
        perror("worker_pool: mkdtemp");
        return 2;
    }
    char log_path[64];
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || close(fd) != 0) {
        perror("worker_pool: log");
        return 2;
    }

    /* One named mutex per job; the children inherit them. */
    int rc = rmutex_configure(NULL); /* the server from RMUTEX_URL */
    if (rc != 0)
        die(0, "rmutex_configure", rc);
    rmutex_t *jobs = calloc((size_t)n_jobs + 1, sizeof *jobs);
    if (!jobs)
        die(0, "calloc", ENOMEM);
    for (int job = 1; job <= n_jobs; job++) {
        char name[RMUTEX_NAME_MAX];
        snprintf(name, sizeof name, "%s%d", prefix, job);
        if ((rc = rmutex_init(&jobs[job], name, NULL)) != 0)
            die(0, "rmutex_init", rc);
    }

    printf("worker_pool: %d workers, jobs %s1..%s%d, %s%d is slow\n", n_workers, prefix, prefix,
           n_jobs, prefix, slow_job);
    fflush(stdout);
    for (int w = 1; w <= n_workers; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("worker_pool: fork");
            return 2;
        }
        if (pid == 0)
            worker(w, jobs);
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;

    /* Read the log: who did what, and was every job done exactly once? */
    int *done_by = calloc((size_t)n_jobs + 1, sizeof *done_by);
    int *times = calloc((size_t)n_jobs + 1, sizeof *times);
    FILE *log = fopen(log_path, "r");
    if (!done_by || !times || !log) {
        perror("worker_pool: reading the log");
        return 2;
    }
    int job, who;
    while (fscanf(log, "%d %d", &job, &who) == 2)
        if (job >= 1 && job <= n_jobs) {
            times[job]++;
            done_by[job] = who;
        }
    fclose(log);

    int bad = 0;
    printf("worker_pool: results\n");
    for (job = 1; job <= n_jobs; job++) {
        char path[96];
        done_path(path, sizeof path, job);
        unlink(path);
        if (times[job] == 1) {
            printf("  %s%d: done by worker %d\n", prefix, job, done_by[job]);
        } else {
            printf("  %s%d: done %d times  <-- wrong\n", prefix, job, times[job]);
            bad = 1;
        }
        if ((rc = rmutex_destroy(&jobs[job])) != 0)
            die(0, "rmutex_destroy", rc);
    }
    unlink(log_path);
    rmdir(dir);
    free(jobs);
    free(done_by);
    free(times);

    if (failed) {
        fprintf(stderr, "worker_pool: a worker failed\n");
        return 2;
    }
    printf("worker_pool: %s\n", bad ? "FAILED: some job was not done exactly once"
                                    : "every job was done exactly once");
    return bad ? 1 : 0;
}
