/* swapsem.c -- semaphores, barriers and once built with <rmutex/pthread.h>,
 * for swap_sem_test.cc.  Every mode appends lines to LOG (O_APPEND, one
 * write each, so the lines of several processes interleave in the order
 * they happened) and prints "done" last.
 *
 *   swapsem slots LOG ITERS      two threads: sem_wait(&slots) (a static
 *                                sem_t, sem_init 2), "enter PID", a pause,
 *                                "leave PID", sem_post
 *   swapsem open NAME V LOG ITERS  the same on sem_open(NAME, O_CREAT, 0600, V)
 *   swapsem openerr NAME FLAGS   sem_open(NAME, FLAGS: "excl" O_CREAT|O_EXCL,
 *                                "none" no O_CREAT), prints "open errno=E"
 *   swapsem handler              a SIGALRM handler posts a semaphore the
 *                                main thread waits on (value 0)
 *   swapsem trywait              "trywait rc=R errno=E value=V" on empty (0)
 *   swapsem heap LOG             a heap sem_t (process-local, said once)
 *   swapsem barrier N ROUNDS LOG two threads meet N members ROUNDS times;
 *                                "serial ROUND" from the serial thread
 *   swapsem once LOG             a named once ("ran PID") and a plain one
 *                                ("local PID")
 * Built with -DSWAPSEM_PLAIN it is shimsem: glibc's calls, for the shim. */
#define _GNU_SOURCE
#ifdef SWAPSEM_PLAIN /* shimsem: the same program with glibc's calls, for the preload shim */
#include <pthread.h>
#include <semaphore.h>
#define RMUTEX_PTHREAD_ONCE_INIT_NAMED(name) PTHREAD_ONCE_INIT
#else
#include <rmutex/pthread.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sem_t slots;
static sem_t wake;
static sem_t empty;
static pthread_barrier_t meet;
static pthread_once_t schema = RMUTEX_PTHREAD_ONCE_INIT_NAMED("swaptest:once:schema");
static pthread_once_t local_once = PTHREAD_ONCE_INIT;
static const char *log_path;
static sem_t *used;
static int iters, rounds, failed;

static void say(const char *fmt, long v)
{
    char line[64];
    int n = snprintf(line, sizeof line, fmt, v);
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0 || write(fd, line, (size_t)n) != n) failed = 1;
    if (fd >= 0) close(fd);
}

static void pause_us(long us)
{
    struct timespec t = { 0, us * 1000 };
    nanosleep(&t, NULL);
}

static void *hold_slots(void *arg)
{
    for (int i = 0; i < iters; i++) {
        if (sem_wait(used)) { failed = 1; break; }
        say("enter %ld\n", (long)getpid());
        pause_us(2000);
        say("leave %ld\n", (long)getpid());
        if (sem_post(used)) { failed = 1; break; }
    }
    return arg;
}

static void *meet_rounds(void *arg)
{
    for (int i = 0; i < rounds; i++) {
        int r = pthread_barrier_wait(&meet);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD) say("serial %ld\n", i);
        else if (r) { failed = 1; break; }
    }
    return arg;
}

static void two_threads(void *(*fn)(void *))
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, fn, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

static void on_alarm(int sig)
{
    (void)sig;
    sem_post(&wake);
}

static void run_schema(void) { say("ran %ld\n", (long)getpid()); pause_us(200000); }
static void run_local(void) { say("local %ld\n", (long)getpid()); }

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    const char *mode = argv[1];
    if (!strcmp(mode, "slots") && argc == 4) {
        log_path = argv[2], iters = atoi(argv[3]);
        if (sem_init(&slots, 0, 2)) return 3;
        used = &slots;
        two_threads(hold_slots);
    } else if (!strcmp(mode, "open") && argc == 6) {
        log_path = argv[4], iters = atoi(argv[5]);
        used = sem_open(argv[2], O_CREAT, 0600, (unsigned)atoi(argv[3]));
        if (used == SEM_FAILED) return 3;
        if (sem_open(argv[2], 0) != used) return 4; /* one sem_t per name */
        two_threads(hold_slots);
        if (sem_close(used) || sem_close(used)) return 5;
    } else if (!strcmp(mode, "openerr") && argc == 4) {
        sem_t *s = sem_open(argv[2], !strcmp(argv[3], "excl") ? O_CREAT | O_EXCL : 0, 0600, 1u);
        printf("open errno=%d\n", s == SEM_FAILED ? errno : 0);
    } else if (!strcmp(mode, "handler")) {
        if (sem_init(&wake, 0, 0)) return 3;
        signal(SIGALRM, on_alarm);
        alarm(1);
        int r;
        while ((r = sem_wait(&wake)) && errno == EINTR) {
        }
        printf("woke rc=%d\n", r);
    } else if (!strcmp(mode, "trywait")) {
        if (sem_init(&empty, 0, 0)) return 3;
        int r = sem_trywait(&empty), e = errno, v = -1;
        sem_getvalue(&empty, &v);
        printf("trywait rc=%d errno=%d value=%d\n", r, r ? e : 0, v);
    } else if (!strcmp(mode, "heap") && argc == 3) {
        log_path = argv[2], iters = 3;
        used = calloc(1, sizeof *used);
        if (!used || sem_init(used, 0, 1)) return 3;
        two_threads(hold_slots);
    } else if (!strcmp(mode, "barrier") && argc == 5) {
        rounds = atoi(argv[3]), log_path = argv[4];
        if (pthread_barrier_init(&meet, NULL, (unsigned)atoi(argv[2]))) return 3;
        two_threads(meet_rounds);
    } else if (!strcmp(mode, "once") && argc == 3) {
        log_path = argv[2];
        if (pthread_once(&schema, run_schema) || pthread_once(&schema, run_schema)) return 3;
        if (pthread_once(&local_once, run_local) || pthread_once(&local_once, run_local)) return 4;
    } else {
        return 2;
    }
    printf("done failed=%d\n", failed);
    fflush(stdout);
    return failed;
}
