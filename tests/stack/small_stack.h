/* small_stack.h -- run code on a thread with a PTHREAD_STACK_MIN stack and
 * measure how much of that stack it used.
 *
 * POSIX lets a program create threads with a PTHREAD_STACK_MIN stack
 * (16 KiB on x86_64 glibc); rmutex promises every public call works there
 * and uses at most RMUTEX_STACK_NEED bytes of it.  small_stack_run() starts
 * such a thread; inside it, small_stack_measure() paints the unused part of
 * the stack below its own frame with a pattern, calls fn, and finds the
 * lowest byte fn overwrote: the depth fn needed below the caller.
 *
 * Plain C and header-only, so the preload shim's and the header swap's test
 * programs (which link nothing of rmutex) use it too.  Under a sanitizer's
 * runtime the thread gets a larger stack (its redzones are not the
 * library's), and the figures are not meaningful.  Which runtime is asked
 * at run time, not of the compiler: the test command's ASan stage builds
 * the C++ tests without the sanitizer (tests/harness/build.h). */
#ifndef RMUTEX_SMALL_STACK_H
#define RMUTEX_SMALL_STACK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SMALL_STACK_SANITIZED \
    (dlsym(RTLD_DEFAULT, "__asan_init") != NULL || dlsym(RTLD_DEFAULT, "__tsan_init") != NULL)

#define SMALL_STACK_PATTERN 0xa5
#define SMALL_STACK_MARGIN 512 /* left unpainted below the measuring frame */

/* Bytes of stack fn(arg) used below the caller's frame.  Must run on a
 * thread made by small_stack_run() (its bounds come from the thread's
 * attributes). */
static __attribute__((noinline, unused)) size_t small_stack_measure(void (*fn)(void *), void *arg)
{
    pthread_attr_t a;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a)) return SIZE_MAX;
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_destroy(&a);
    volatile unsigned char *base = (unsigned char *)lo;
    unsigned char *top = (unsigned char *)__builtin_frame_address(0) - SMALL_STACK_MARGIN;
    for (volatile unsigned char *p = base; p < top; p++) *p = SMALL_STACK_PATTERN;
    fn(arg);
    volatile unsigned char *p = base;
    while (p < top && *p == SMALL_STACK_PATTERN) p++;
    return (size_t)(top - (unsigned char *)p) + SMALL_STACK_MARGIN;
}

struct small_stack_job {
    void *(*fn)(void *);
    void *arg;
};

/* Run fn(arg) on a new thread with a PTHREAD_STACK_MIN stack (64 KiB under
 * a sanitizer); wait for it.  0, or pthread_create's error. */
static inline int small_stack_run(void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, SMALL_STACK_SANITIZED ? 65536 : PTHREAD_STACK_MIN);
    int r = pthread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    if (!r) pthread_join(t, NULL);
    return r;
}

#endif
