/* depth_hook.h -- see depth_hook.c. */
#ifndef RMUTEX_TEST_DEPTH_HOOK_H
#define RMUTEX_TEST_DEPTH_HOOK_H

#include <rmutex.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Set the recursion depth of m's current hold (depth > 0); EPERM when m is
 * not held, EINVAL for a bad m. */
int rmt_set_depth(rmutex_t *m, unsigned depth);

#ifdef __cplusplus
}
#endif

#endif
