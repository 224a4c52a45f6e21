/* rwcount.h -- readers and writers of one pthread_rwlock_t, in the
 * programs the tests run (swapprog.c against <rmutex/pthread.h>,
 * shimprog.c against <pthread.h> under the preload shim): plain pthread
 * code, included once by each.
 *
 * rwc_count(l, FILE, ITERS): two writer threads each add ITERS to the
 * number in FILE (read, pause, write) under the write lock, two reader
 * threads each take the read lock ITERS times and stay a moment.  Every
 * process running it maps FILE.shm: who is inside, across processes.  A
 * reader that finds a writer inside, or a writer that finds anybody else,
 * counts a violation.  It prints "done max_readers=N violations=N" (the
 * most readers seen inside at once, in any process) and returns 1 if a
 * lock call failed or anything was violated.
 *
 * rwc_attempt(l, "try" | "timed", MS): trywrlock, or timedrdlock with MS
 * to go, once; prints "try rc=N" / "timed rc=N". */
#ifndef RWCOUNT_H
#define RWCOUNT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct rwc_inside {
    int readers, writers, max_readers, violations;
};

static struct {
    pthread_rwlock_t *lock;
    const char *file;
    int iters, failed;
    struct rwc_inside *in;
} rwc;

static void rwc_nap(long us)
{
    struct timespec t = { 0, us * 1000 };
    nanosleep(&t, NULL);
}

static void *rwc_writer(void *arg)
{
    for (int i = 0; i < rwc.iters; i++) {
        if (pthread_rwlock_wrlock(rwc.lock)) {
            __atomic_store_n(&rwc.failed, 1, __ATOMIC_RELAXED);
            return arg;
        }
        int w = __atomic_add_fetch(&rwc.in->writers, 1, __ATOMIC_SEQ_CST);
        if (w != 1 || __atomic_load_n(&rwc.in->readers, __ATOMIC_SEQ_CST))
            __atomic_add_fetch(&rwc.in->violations, 1, __ATOMIC_SEQ_CST);
        long v = 0;
        FILE *f = fopen(rwc.file, "r");
        if (f) {
            if (fscanf(f, "%ld", &v) != 1) v = 0;
            fclose(f);
        }
        rwc_nap(300);
        if ((f = fopen(rwc.file, "w"))) {
            fprintf(f, "%ld\n", v + 1);
            fclose(f);
        }
        __atomic_sub_fetch(&rwc.in->writers, 1, __ATOMIC_SEQ_CST);
        if (pthread_rwlock_unlock(rwc.lock)) __atomic_store_n(&rwc.failed, 1, __ATOMIC_RELAXED);
    }
    return arg;
}

static void *rwc_reader(void *arg)
{
    for (int i = 0; i < rwc.iters; i++) {
        if (pthread_rwlock_rdlock(rwc.lock)) {
            __atomic_store_n(&rwc.failed, 1, __ATOMIC_RELAXED);
            return arg;
        }
        int r = __atomic_add_fetch(&rwc.in->readers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&rwc.in->writers, __ATOMIC_SEQ_CST))
            __atomic_add_fetch(&rwc.in->violations, 1, __ATOMIC_SEQ_CST);
        int m = __atomic_load_n(&rwc.in->max_readers, __ATOMIC_SEQ_CST);
        while (r > m && !__atomic_compare_exchange_n(&rwc.in->max_readers, &m, r, 0,
                                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        }
        rwc_nap(3000);
        __atomic_sub_fetch(&rwc.in->readers, 1, __ATOMIC_SEQ_CST);
        if (pthread_rwlock_unlock(rwc.lock)) __atomic_store_n(&rwc.failed, 1, __ATOMIC_RELAXED);
        rwc_nap(1000);
    }
    return arg;
}

static int rwc_count(pthread_rwlock_t *l, const char *file, int iters)
{
    char shm[4096];
    snprintf(shm, sizeof shm, "%s.shm", file);
    int fd = open(shm, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(struct rwc_inside))) return 1;
    rwc.in = mmap(NULL, sizeof *rwc.in, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (rwc.in == MAP_FAILED) return 1;
    rwc.lock = l;
    rwc.file = file;
    rwc.iters = iters;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, i < 2 ? rwc_writer : rwc_reader, NULL)) return 1;
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    int violations = __atomic_load_n(&rwc.in->violations, __ATOMIC_SEQ_CST);
    printf("done max_readers=%d violations=%d\n", __atomic_load_n(&rwc.in->max_readers, __ATOMIC_SEQ_CST),
           violations);
    fflush(stdout);
    return rwc.failed || violations;
}

static int rwc_attempt(pthread_rwlock_t *l, const char *how, long ms)
{
    int rc;
    if (!strcmp(how, "try")) {
        rc = pthread_rwlock_trywrlock(l);
    } else {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += ms / 1000;
        t.tv_nsec += ms % 1000 * 1000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        rc = pthread_rwlock_timedrdlock(l, &t);
    }
    printf("%s rc=%d\n", how, rc);
    fflush(stdout);
    if (!rc) pthread_rwlock_unlock(l);
    return 0;
}

#endif
