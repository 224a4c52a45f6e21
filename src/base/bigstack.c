/* bigstack.c -- run a function where it has stack enough.
 *
 * DESIGN
 * ------
 * rmutex promises that every call works on a thread made with a
 * PTHREAD_STACK_MIN (16 KiB) stack and uses at most RMUTEX_STACK_NEED
 * (8 KiB) of it (rmutex.h).  Its own code keeps to that; OpenSSL does not:
 * loading it, a handshake (certificate chain checks, key exchange) and
 * even a record's read take up to 8 KiB more, on top of the library's own
 * frames, and a PTHREAD_STACK_MIN stack overflows.  So TLS's calls into OpenSSL go through
 * rm_bigstack_run():
 *
 *   - on a thread with RM_BIGSTACK_ROOM left below the current frame (any
 *     thread made with the default stack), fn runs right there: the cost
 *     is a comparison, the thread's bounds being asked once per thread
 *     (pthread_getattr_np) and kept in thread-local storage;
 *   - elsewhere fn runs on a stack of RM_BIGSTACK_SIZE taken from the heap
 *     for the call, switched to with swapcontext() and freed afterwards.
 *     No state survives the call, so a fork or a thread's exit leaves
 *     nothing behind.
 *
 * The switch keeps what the thread is: the signal mask (getcontext takes
 * it at each call, so a library thread's blocked signals stay blocked),
 * its thread-local storage, errno.  Nothing unwinds across it: the entry
 * points run with cancellation disabled (api.c) and fn does not call back
 * into the program.  A signal handler that runs meanwhile runs on the heap
 * stack, which has room for it. */
#include "bigstack.h"
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <ucontext.h>

/* Below this much room fn runs on a stack of its own, of this size.
 * OpenSSL 3's deepest call here (a handshake, P-256 certificates) was
 * measured at 8 KiB; the rest is margin. */
#define RM_BIGSTACK_ROOM (64 * 1024)
#define RM_BIGSTACK_SIZE (64 * 1024)

static __thread uintptr_t stack_lo; /* the lowest address of this thread's stack */
static __thread int stack_known;    /* 1: stack_lo is set; -1: unknown, assume room */

/* One call's stack and the two contexts (on the heap too: a ucontext_t
 * is near 1 KiB, too much for a small stack). */
struct job {
    void (*fn)(void *);
    void *arg;
    ucontext_t back, on;
    char stack[RM_BIGSTACK_SIZE];
};

static __thread struct job *running;

static void trampoline(void) { running->fn(running->arg); }

/* The room below the caller's frame, or SIZE_MAX when not known. */
static __attribute__((noinline)) size_t room(void)
{
    if (!stack_known) {
        pthread_attr_t a;
        void *lo;
        size_t size;
        stack_known = -1;
        if (!pthread_getattr_np(pthread_self(), &a)) {
            if (!pthread_attr_getstack(&a, &lo, &size)) {
                stack_lo = (uintptr_t)lo;
                stack_known = 1;
            }
            pthread_attr_destroy(&a);
        }
    }
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (stack_known < 0 || here < stack_lo) return SIZE_MAX;
    return here - stack_lo;
}

int rm_bigstack_run(void (*fn)(void *), void *arg)
{
    if (room() >= RM_BIGSTACK_ROOM) {
        fn(arg);
        return 0;
    }
    int saved = errno;
    struct job *job = malloc(sizeof *job), *outer = running;
    if (!job) return errno = saved, ENOMEM;
    job->fn = fn, job->arg = arg;
    RM_ASSERT(!getcontext(&job->on));
    job->on.uc_stack.ss_sp = job->stack;
    job->on.uc_stack.ss_size = sizeof job->stack;
    job->on.uc_link = &job->back;
    makecontext(&job->on, trampoline, 0);
    running = job;
    errno = saved;
    RM_ASSERT(!swapcontext(&job->back, &job->on));
    saved = errno; /* fn's */
    running = outer;
    free(job);
    errno = saved;
    return 0;
}
