/* semopen.c -- sem_open's names, for the header swap (pthread_sem.c) and
 * the preload shim (semlisted.c).
 *
 * DESIGN
 * ------
 * sem_open's names are explicit: "/jobs" is the rsem "jobs" (rmutex.h).
 * A process gets one sem_t per name (glibc's rule: open twice, the same
 * pointer; each open needs a close), kept in a list here and made by
 * rsem_open, which asks Redis whether the name exists (O_CREAT, O_EXCL)
 * as sem_open must.  The list's lock is never held across that round
 * trip: two threads that open one name at once each make one, and the
 * second keeps the first's.  Where the objects live is the caller's
 * (struct rm_semopen_mem): the swap's on the heap, the shim's in an arena
 * of its own, so that its sem_wait tells them from glibc's with one range
 * check.  Return convention: a positive errno. */
#define RMUTEX_PTHREAD_NO_MACROS
#include <rmutex/pthread.h>

#include "semopen.h"
#include "say.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>


struct opened {
    struct opened *next;
    char *name;
    rmutex_pthread_sem_t *sem;
};

static struct {
    pthread_mutex_t mu;
    struct opened *head;
} opened = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* fork(): the child's only thread starts with the list's lock free. */
static void fork_child(void) { pthread_mutex_init(&opened.mu, NULL); }

__attribute__((constructor)) static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

/* The rsem name of a sem_open name: without its leading slashes; 0 or
 * EINVAL (none left, or another slash), ENAMETOOLONG (glibc's limit). */
static int bare_name(const char *name, const char **bare)
{
    if (!name) return EINVAL;
    while (*name == '/') name++;
    if (!*name || strchr(name, '/')) return EINVAL;
    if (strlen(name) > NAME_MAX - 4) return ENAMETOOLONG; /* "sem.<name>" in /dev/shm */
    *bare = name;
    return 0;
}

/* The entry of name (with opened.mu). */
static struct opened *find_locked(const char *name)
{
    struct opened *o = opened.head;
    while (o && strcmp(o->name, name)) o = o->next;
    return o;
}

/* name is open in this process: one more open of it. */
static rmutex_pthread_sem_t *open_again_locked(struct opened *o)
{
    o->sem->rm_opened_++;
    return o->sem;
}

/* An open that did not happen: what it had made, given back; NULL with
 * errno e. */
static rmutex_pthread_sem_t *discard(struct opened *fresh, char *copy, rmutex_pthread_sem_t *s,
                                     const struct rm_semopen_mem *mem, int e)
{
    free(fresh), free(copy);
    if (s) mem->release(s);
    errno = e;
    return NULL;
}

rmutex_pthread_sem_t *rm_semopen(const char *name, int oflag, unsigned value,
                                  const rsemattr_t *attr, const struct rm_semopen_mem *mem)
{
    const char *bare;
    int r = bare_name(name, &bare);
    if (!r && (oflag & O_CREAT) && value > SEM_VALUE_MAX) r = EINVAL;
    if (r) {
        errno = r;
        return NULL;
    }
    int excl = (oflag & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
    pthread_mutex_lock(&opened.mu);
    struct opened *o = find_locked(bare);
    rmutex_pthread_sem_t *s = o && !excl ? open_again_locked(o) : NULL;
    pthread_mutex_unlock(&opened.mu);
    if (s) return s;
    if (o) { /* O_EXCL, and this process has it open: it exists */
        errno = EEXIST;
        return NULL;
    }

    struct opened *fresh = calloc(1, sizeof *fresh);
    s = mem->alloc();
    char *copy = strdup(bare);
    if (!fresh || !s || !copy) return discard(fresh, copy, s, mem, ENOMEM);
    int flags = (oflag & O_CREAT ? RSEM_CREATE : 0) | (excl ? RSEM_EXCL : 0);
    if ((r = rsem_open(&s->rm_sem_, bare, value, attr, flags))) {
        if (r != EEXIST && r != ENOENT && r != EINVAL && r != ENOMEM)
            rm_say("sem_open(\"%s\"): Redis did not answer it: %s", name, rmutex_detail());
        return discard(fresh, copy, s, mem, r);
    }
    s->rm_opened_ = 1;

    pthread_mutex_lock(&opened.mu);
    if ((o = find_locked(bare))) { /* another thread opened it meanwhile */
        rmutex_pthread_sem_t *theirs = open_again_locked(o);
        pthread_mutex_unlock(&opened.mu);
        rsem_destroy(&s->rm_sem_);
        discard(fresh, copy, s, mem, 0);
        return theirs;
    }
    fresh->name = copy;
    fresh->sem = s;
    fresh->next = opened.head;
    opened.head = fresh;
    pthread_mutex_unlock(&opened.mu);
    return s;
}

int rm_semclose(rmutex_pthread_sem_t *s, const struct rm_semopen_mem *mem)
{
    pthread_mutex_lock(&opened.mu);
    struct opened **p = &opened.head;
    while (*p && (*p)->sem != s) p = &(*p)->next;
    struct opened *o = *p;
    int last = o && --s->rm_opened_ == 0;
    if (last) *p = o->next;
    pthread_mutex_unlock(&opened.mu);
    if (!o) return EINVAL; /* not sem_open's */
    if (!last) return 0;
    int r = rsem_destroy(&s->rm_sem_);
    free(o->name), free(o);
    if (!r) mem->release(s); /* else a thread still waits on it (POSIX: undefined): kept */
    return r;
}

int rm_semunlink(const char *name)
{
    const char *bare;
    int r = bare_name(name, &bare);
    return r ? r : rsem_unlink(bare);
}
