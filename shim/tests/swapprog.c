/* swapprog.c -- a pthread counter built with <rmutex/pthread.h>: each run
 * adds ITERS to the number in FILE under a static mutex (read, pause,
 * write), so runs in several processes lose updates unless the mutex
 * excludes them all.  usage: swapprog FILE ITERS [small|zero|heap|two]:
 *   small  the loop runs on a thread with a PTHREAD_STACK_MIN stack;
 *   zero   under zero_lock, a global with no initializer (all zeros);
 *   heap   under a calloc'd mutex (all zeros, in no symbol);
 *   two    two threads run the loop (2 * ITERS);
 *   spin   under spin_lock, a pthread_spinlock_t (pthread_spin_init).
 * It prints "done cache_hits=N" (rmutex_stats: RMUTEX_CACHE=1 caches).
 * "swapprog try" and "swapprog timed MS" trylock / timedlock the counter's
 * mutex once and print "try rc=N" / "timed rc=N".
 * "swapprog rw FILE ITERS [zero]": readers and writers of table_rw (or
 * zero_rw, a global with no initializer) -- rwcount.h; "swapprog rwtry"
 * and "swapprog rwtimed MS": rwc_attempt on table_rw. */
#define _GNU_SOURCE
#include <rmutex/pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tests/stack/small_stack.h"
#include "rwcount.h"

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t zero_lock; /* no initializer: zero-filled */
static pthread_mutex_t *lock = &counter_lock;
static pthread_spinlock_t spin_lock;
static int use_spin;
static pthread_rwlock_t table_rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
pthread_rwlock_t zero_rw; /* no initializer: zero-filled */
static const char *file;
static int iters, failed;

static void *count(void *arg)
{
    for (int i = 0; i < iters; i++) {
        if (use_spin ? pthread_spin_lock(&spin_lock) : pthread_mutex_lock(lock)) {
            __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
            return arg;
        }
        long v = 0;
        FILE *f = fopen(file, "r");
        if (f) {
            if (fscanf(f, "%ld", &v) != 1) v = 0;
            fclose(f);
        }
        struct timespec pause = { 0, 300000 };
        nanosleep(&pause, NULL);
        if ((f = fopen(file, "w"))) {
            fprintf(f, "%ld\n", v + 1);
            fclose(f);
        }
        if (use_spin ? pthread_spin_unlock(&spin_lock) : pthread_mutex_unlock(lock)) {
            __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
            return arg;
        }
    }
    return arg;
}

/* "try" / "timed MS": one attempt at the counter's mutex. */
static int attempt(int argc, char **argv)
{
    int rc;
    if (argc == 2) {
        rc = pthread_mutex_trylock(lock);
    } else {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        long ms = atol(argv[2]);
        t.tv_sec += ms / 1000;
        t.tv_nsec += ms % 1000 * 1000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        rc = pthread_mutex_timedlock(lock, &t);
    }
    printf("%s rc=%d\n", argv[1], rc);
    if (!rc) pthread_mutex_unlock(lock);
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc == 2 && !strcmp(argv[1], "try")) || (argc == 3 && !strcmp(argv[1], "timed")))
        return attempt(argc, argv);
    if (argc == 2 && !strcmp(argv[1], "rwtry")) return rwc_attempt(&table_rw, "try", 0);
    if (argc == 3 && !strcmp(argv[1], "rwtimed")) return rwc_attempt(&table_rw, "timed", atol(argv[2]));
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "rw"))
        return rwc_count(argc == 5 && !strcmp(argv[4], "zero") ? &zero_rw : &table_rw, argv[2],
                         atoi(argv[3]));
    const char *mode = argc == 4 ? argv[3] : "";
    int small = !strcmp(mode, "small"), two = !strcmp(mode, "two");
    if (argc != 3 &&
        !(argc == 4 && (small || two || !strcmp(mode, "zero") || !strcmp(mode, "heap") ||
                        !strcmp(mode, "spin"))))
        return 2;
    if (!strcmp(mode, "zero")) lock = &zero_lock;
    if (!strcmp(mode, "heap") && !(lock = calloc(1, sizeof *lock))) return 1;
    if ((use_spin = !strcmp(mode, "spin")) && pthread_spin_init(&spin_lock, PTHREAD_PROCESS_PRIVATE)) return 1;
    file = argv[1];
    iters = atoi(argv[2]);
    pthread_t other;
    if (two && pthread_create(&other, NULL, count, NULL)) return 1;
    if (small ? small_stack_run(count, NULL) != 0 : count(NULL) != NULL) return 1;
    if (two && pthread_join(other, NULL)) return 1;
    if (__atomic_load_n(&failed, __ATOMIC_RELAXED)) return 1;
    rmutex_stats_t st;
    memset(&st, 0, sizeof st);
    rmutex_stats(&st, sizeof st);
    printf("done cache_hits=%llu\n", (unsigned long long)st.cache_hits);
    return 0;
}
