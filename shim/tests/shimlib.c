/* shimlib.c -- a shared library with mutexes of its own, for the shim
 * tests: an exported global and a file-local static (only in .symtab). */
#include <pthread.h>

__attribute__((visibility("default"))) pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lib_static_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((visibility("default"))) pthread_mutex_t *shimlib_static_lock(void)
{
    return &lib_static_lock;
}
