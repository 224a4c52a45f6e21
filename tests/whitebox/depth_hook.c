/* depth_hook.c -- the one look inside the library the tests take.
 *
 * A RECURSIVE mutex refuses a lock past RMUTEX_RECURSION_MAX (2^31 - 1)
 * levels with EAGAIN, as glibc does at its own limit.  Reaching that depth
 * through the API would take 2^31 calls, so the test links the static
 * library and sets the caller's depth directly, under the mutex's own lock,
 * as the API would have left it. */
#include <errno.h>

#include "hold.h"
#include "thread.h"
#include "mutex.h"

#include "depth_hook.h"

int rmt_set_depth(rmutex_t *m, unsigned depth)
{
    int err;
    struct rm_mutex *mx = rm_mutex_get(m, &err);
    if (!mx) return err;
    pthread_mutex_lock(&mx->lock->mu);
    struct rm_hold *h = rm_hold_of(mx->lock, rm_thread_self());
    err = h && depth ? 0 : EPERM;
    if (!err) h->depth = depth;
    pthread_mutex_unlock(&mx->lock->mu);
    return err;
}
