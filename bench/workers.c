/* workers.c -- see workers.h. */
#include "workers.h"
#include "clock.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>

int workers_run(const char *id, struct workers *f, int ready_n, const pid_t *pid, int procs,
                double seconds, double stop_seconds, int64_t *t0, int64_t *t1)
{
    int ok = 1;
    for (int64_t until = now_ns() + 60000000000LL; atomic_load(&f->ready) < ready_n;) {
        if (now_ns() > until) {
            fprintf(stderr, "bench %s: workers did not get ready\n", id);
            atomic_store(&f->failed, 1);
            break;
        }
        sleep_ns(1000000);
    }
    *t0 = now_ns();
    atomic_store(&f->go, 1);
    while (now_ns() < *t0 + (int64_t)(seconds * 1e9) && !atomic_load(&f->failed)) sleep_ns(10000000);
    *t1 = now_ns();
    atomic_store(&f->stop, 1);
    for (int p = 0; p < procs; p++) {
        int status, waited = 0;
        int64_t until = now_ns() + (int64_t)(stop_seconds * 1e9);
        while (!(waited = waitpid(pid[p], &status, WNOHANG) == pid[p]) && now_ns() < until)
            sleep_ns(10000000);
        if (!waited) {
            fprintf(stderr, "bench %s: a worker process did not stop; killed\n", id);
            kill(pid[p], SIGKILL);
            waitpid(pid[p], &status, 0);
            ok = 0;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            ok = 0;
        }
    }
    if (atomic_load(&f->failed)) ok = 0;
    return ok ? 0 : -1;
}
