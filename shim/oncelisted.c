/* oncelisted.c -- the interposer's body for once controls listed in
 * RMUTEX_PRELOAD (";once").
 *
 * A listed pthread_once_t is a ronce (rmutex.h) of the entry's name: its
 * routine runs once for every process that lists it, in one thread of one
 * of them, and the others return after it has run; if its runner dies,
 * another runs it.  Opt-in by name, like everything the shim distributes:
 * a once-routine usually initializes its own process's memory, which each
 * process needs (docs/porting.md).  Redis trouble is said and waited
 * through (take.c), as for a lock: the routine has not run until Redis
 * says so.  glibc's pthread_once is found with dlsym(RTLD_NEXT) at its
 * first use, for every once control not listed. */
#include "shim.h"
#include "take.h"

#include <dlfcn.h>
#include <errno.h>

int rm_shim_once_run(struct rm_shim_once *so, void (*routine)(void))
{
    rm_take_ns pause = 0;
    int r;
    while ((r = ronce(&so->once, routine)) && r != EINVAL && r != EDEADLK)
        rm_take_ask_again(r, &pause);
    return r;
}

int rm_shim_once_real(pthread_once_t *o, void (*routine)(void))
{
    typedef int (*once_fn)(pthread_once_t *, void (*)(void));
    static once_fn real;
    once_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = (once_fn)dlsym(RTLD_NEXT, "pthread_once");
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    return fn ? fn(o, routine) : ENOSYS;
}
