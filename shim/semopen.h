/* semopen.h -- sem_open's names (semopen.c). */
#ifndef RM_SHIM_SEMOPEN_H
#define RM_SHIM_SEMOPEN_H

#define RMUTEX_PTHREAD_NO_MACROS
#include <rmutex/pthread.h>

/* Where the sem_t objects of sem_open live. */
struct rm_semopen_mem {
    rmutex_pthread_sem_t *(*alloc)(void); /* zero-filled; NULL: out of memory */
    void (*release)(rmutex_pthread_sem_t *s);
};

/* sem_open(name, oflag, mode, value) with attr (NULL: the defaults): the object, or NULL with errno set
 * (EINVAL, ENAMETOOLONG, EEXIST, ENOENT, ENOMEM, and Redis's errors). */
rmutex_pthread_sem_t *rm_semopen(const char *name, int oflag, unsigned value,
                                  const rsemattr_t *attr, const struct rm_semopen_mem *mem);

/* sem_close: 0 or a positive errno (EINVAL: not sem_open's). */
int rm_semclose(rmutex_pthread_sem_t *s, const struct rm_semopen_mem *mem);

/* sem_unlink: 0 or a positive errno (ENOENT, EINVAL, ENAMETOOLONG). */
int rm_semunlink(const char *name);

#endif
