/* heapcount.c -- counts the heap the process allocates, for W5's memory per
 * waiting thread.
 *
 * malloc, calloc, realloc, free and the aligned allocators are defined here,
 * in the executable, so every call in the process -- librmutex's and
 * hiredis's included -- comes here first (ELF symbol interposition) and
 * goes on to glibc's __libc_* functions.  While counting is on, each block
 * handed out adds its usable size and each block freed subtracts its
 * usable size, so the sum is the net growth of live blocks.  Unlike
 * mallinfo2() this does not count freed blocks that glibc keeps in a
 * thread's cache (tcache) as in use.  When counting is off the cost is one
 * relaxed load per call. */
#include "heapcount.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* The project builds with hidden visibility; these must be seen by the
 * dynamic linker to interpose. */
#define EXPORT __attribute__((visibility("default")))

static _Atomic int counting;
static _Atomic int64_t net;

void heapcount_start(void)
{
    atomic_store(&net, 0);
    atomic_store(&counting, 1);
}

int64_t heapcount_net(void) { return atomic_load(&net); }

void heapcount_stop(void) { atomic_store(&counting, 0); }

static inline void add(void *p, int sign)
{
    if (p && atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&net, sign * (int64_t)malloc_usable_size(p), memory_order_relaxed);
}

EXPORT void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    add(p, 1);
    return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
    void *p = __libc_calloc(n, size);
    add(p, 1);
    return p;
}

EXPORT void *realloc(void *old, size_t n)
{
    add(old, -1);
    void *p = __libc_realloc(old, n);
    if (p) add(p, 1);
    else if (n) add(old, 1); /* failed: the old block lives on */
    return p;
}

EXPORT void free(void *p)
{
    add(p, -1);
    __libc_free(p);
}

EXPORT void *memalign(size_t align, size_t n)
{
    void *p = __libc_memalign(align, n);
    add(p, 1);
    return p;
}

EXPORT void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    add(p, 1);
    *out = p;
    return 0;
}
