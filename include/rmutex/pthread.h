/* rmutex/pthread.h -- include this instead of <pthread.h> and the program's
 * pthread mutexes become rmutexes, shared with every other process that
 * runs the same program against the same Redis.
 *
 *   #include <rmutex/pthread.h>     // instead of <pthread.h>
 *   static pthread_mutex_t orders = PTHREAD_MUTEX_INITIALIZER;
 *   ...
 *   pthread_mutex_lock(&orders);    // now also excludes other processes
 *
 * Link with librmutex_pthread and librmutex (CMake: rmutex::rmutex_pthread).
 * Redis is found as by any librmutex program (RMUTEX_URL).
 *
 * How: glibc's <pthread.h> is included first and declares its own types and
 * functions; this header then renames, with macros, pthread_mutex_t,
 * pthread_mutexattr_t, the static initializers, the pthread_mutex_*,
 * pthread_mutexattr_* and pthread_cond_{wait,timedwait,clockwait} calls to
 * a wrapper type and wrapper functions.  A wrapped mutex is glibc's mutex
 * (so threads of one process, types and robustness behave as before) plus
 * an rmutex taken before it.  pthread_cond_t, PTHREAD_COND_INITIALIZER and
 * pthread_cond_{init,destroy,signal,broadcast,wait,timedwait,clockwait}
 * are renamed too: a wrapped condition variable is an rcond (rmutex.h),
 * shared with every process like the mutexes, plus glibc's condition
 * variable for waits with a mutex that has no name (a zero-filled one in
 * no symbol).  Return codes are the pthread ones; pthread_condattr_* and
 * the other pthread calls are glibc's.
 *
 * Names.  Each mutex needs a lock name that is the same in every process
 * running the program.  By default it is where the mutex is defined
 * (PTHREAD_MUTEX_INITIALIZER) or initialized (pthread_mutex_init): the
 * source file as the compiler saw it, a colon and the line, after the
 * prefix RMUTEX_PTHREAD_PREFIX (define it before the include, e.g. with
 * -DRMUTEX_PTHREAD_PREFIX='"shop:"'; default none):
 *
 *   "shop:src/orders.c:42"
 *
 * __FILE__ is the path given to the compiler, so build with
 * -fmacro-prefix-map=<source dir>/= to keep absolute build paths out of it
 * (the examples' CMake does), and build every copy of the program from the
 * same tree layout.  A mutex that lives in a symbol (a global or static
 * variable, an element of a static array or struct) and is initialized by
 * pthread_mutex_init is named after that symbol instead, as a zero-filled
 * one is (below): "<program>:<symbol>+<offset>", so each element of a
 * static array initialized in a loop is a lock of its own.  Limits of the
 * call-site rule: editing the file above the mutex moves its line and so
 * renames it (processes running old and new builds then do not exclude
 * each other); every heap or stack mutex initialized by one
 * pthread_mutex_init call site (in a loop, in a constructor function
 * called for many objects) gets the same name, so they are one lock across
 * processes and threads -- safe, but they serialize each other: while a
 * thread holds one of them, no other thread of any process takes any of
 * them.  The thread that holds one may lock the others (nested, in any
 * order) without deadlock: the name is taken first and counted once per
 * mutex (rmutex.h: a name is one lock), then the mutex itself, whose type
 * answers a relock of that same mutex.  A condition-variable wait on one of
 * them while holding another keeps the name for the wait.  Name
 * production mutexes explicitly:
 *
 *   static pthread_mutex_t orders = RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED("shop:orders");
 *
 *   pthread_mutexattr_t a;
 *   pthread_mutexattr_init(&a);
 *   rmutex_pthread_mutexattr_setname(&a, "shop:account:42");  // copied at init
 *   pthread_mutex_init(&account->lock, &a);
 *
 * A zero-filled mutex ("static pthread_mutex_t m;" with no initializer, or
 * memory set to 0: glibc's PTHREAD_MUTEX_INITIALIZER is all zeros) has no
 * call site; on first use it is named after the symbol it lives in,
 * "<program or library file name>:<symbol>" ("...:<symbol>+<offset>"
 * inside an array or struct; no prefix), found in the object's symbol
 * tables as the preload shim finds symbols.  A zero-filled mutex that no
 * symbol covers (heap memory, a stripped binary) works as a process-local
 * mutex, and the process prints one warning line on stderr.
 *
 * Condition variables are named by the same rule (where PTHREAD_COND_
 * INITIALIZER is; the symbol one lives in, zero-filled or initialized by
 * pthread_cond_init; else pthread_cond_init's call site)
 * or explicitly: RMUTEX_PTHREAD_COND_INITIALIZER_NAMED("shop:nonempty"),
 * rmutex_pthread_cond_init_named(&c, attr, "shop:nonempty").  A wait
 * releases the mutex's name and its local mutex and takes both back (name
 * first); waiting while holding another mutex of the same name is EINVAL.
 *
 * Read-write locks: every pthread_rwlock_t becomes an rrwlock (rmutex.h),
 * named by the same rules (PTHREAD_RWLOCK_INITIALIZER's call site; the
 * symbol one lives in, zero-filled or initialized by pthread_rwlock_init;
 * else pthread_rwlock_init's call site; or
 * RMUTEX_PTHREAD_RWLOCK_INITIALIZER_NAMED("shop:table"),
 * rmutex_pthread_rwlockattr_setname()); readers share it across every
 * process, a writer holds it alone.  Its kind is the program's: glibc's
 * default PTHREAD_RWLOCK_PREFER_READER_NP (a reader goes in whenever no
 * writer holds it), or what pthread_rwlockattr_setkind_np asked for
 * (PREFER_WRITER_NP and PREFER_WRITER_NONRECURSIVE_NP: first come, first
 * served, a waiting writer holds back the readers after it -- a thread's
 * re-read still never waits).  The return codes are the rrwlock's, which
 * answer what glibc leaves to hang: wrlock by a reader is EDEADLK, an
 * unlock by a thread that holds nothing EPERM.  Redis trouble is waited
 * through as for mutexes (below).  A rwlock cannot be a mutex's name.
 *
 * Spinlocks: every pthread_spinlock_t becomes a distributed non-fair mutex
 * (pthread_spin_lock blocks on Redis instead of spinning), named by the
 * symbol it lives in or pthread_spin_init's call site; a relock by its
 * holder never returns, as glibc's spins; PTHREAD_PROCESS_SHARED is
 * ENOTSUP (shared through Redis already).  Nothing a program shares
 * between threads stays process-local without a word.
 *
 * Semaphores (<semaphore.h>, included here): a sem_t initialized by
 * sem_init in a symbol (a global or static variable, an element of a
 * static array) becomes an rsem (rmutex.h) named by that symbol
 * ("<program>:<symbol>+<offset>"); one in heap or stack memory has no
 * name every process would agree on -- two heap semaphores made at one
 * call site are not one semaphore, as two mutexes may be one lock -- so it
 * stays glibc's and the process says so once on stderr, unless it is
 * named: rmutex_pthread_sem_init_named(&s, "shop:slots", value).  The
 * first process to use a name gives it its value; the others join it; the
 * value outlives the processes (sem_unlink or rsem_unlink start it
 * anew).  sem_open(name, ...) with a name
 * ("/jobs") is the rsem of that name without its slash ("jobs"): O_CREAT,
 * O_EXCL (EEXIST), no O_CREAT (ENOENT) as POSIX says, one sem_t per name
 * in a process; sem_close and sem_unlink as POSIX's.  Permits a process
 * takes are leased and come back if it dies (docs/semaphore.md); a post
 * by a process that holds none adds one.  Return codes are POSIX's (-1 and
 * errno); Redis trouble is waited through as for mutexes (sem_trywait
 * says EAGAIN, the timed forms ETIMEDOUT).  sem_post from a signal
 * handler: see rmutex_pthread_sem_post (below).  pshared != 0 is ENOTSUP.
 *
 * Barriers: a pthread_barrier_t in a symbol becomes an rbarrier (rmutex.h)
 * named by the symbol, for count members in every process together (each
 * process initializes it with the same count); a heap or stack one stays
 * glibc's, said once, unless named with rmutex_pthread_barrier_init_named.
 * When a member process dies while others wait, pthread_barrier_wait
 * returns EOWNERDEAD to the others (and says so once on stderr) instead of
 * waiting for ever; the next generation starts fresh.
 *
 * Once: pthread_once with PTHREAD_ONCE_INIT stays per process, as the
 * program wrote it: a once-routine almost always initializes its own
 * process's memory (a table, a key, a seed), which every process needs.
 * One that must run once across every process (make a shared schema) is
 * named: static pthread_once_t schema = RMUTEX_PTHREAD_ONCE_INIT_NAMED("shop:schema");
 * pthread_once then runs its routine once for all processes (ronce,
 * rmutex.h): if its runner dies, another process runs it.
 *
 * Other extensions: rmutex_pthread_mutexattr_setfair(), _setlease(),
 * _setcache() (as rmutexattr_setfair/setlease/setcache).  Lock caching for
 * every mutex of the program: RMUTEX_CACHE=1 in the environment (a mutex
 * whose attribute says _setcache(0) is not cached) -- a ported program
 * whose threads lock a mutex many times in a row then pays no round trip
 * for a relock while no other process wants it (rmutexattr_setcache).
 *
 * Redis trouble (shim/policy.c, shim/README.md): no call returns an error
 * of Redis's -- ported code does not check.  While Redis is unreachable,
 * or refuses (a bad or misspelt RMUTEX_URL, a refused login, an ACL user
 * without the rights), lock and the condition waits wait, trylock returns
 * EBUSY, the timed forms ETIMEDOUT.  One stderr line says an outage
 * ("rmutex pthread[PROGRAM PID]: Redis is unreachable ...") and one its
 * end (RMUTEX_OUTAGE_LINES=0: neither); one line names an error, once;
 * then RMUTEX_ON_ERROR=wait (the default) keeps asking Redis, so a login
 * or ACL fixed on the server heals the program, and RMUTEX_ON_ERROR=abort
 * ends the program with that line.
 *
 * Deviations from pthreads: see rm_dm (shim/dmutex.c) and docs/porting.md.  An
 * unlock by a thread that does not hold the mutex returns EPERM for every
 * type; trylock also returns EBUSY while Redis cannot be used (above);
 * unlock returns EPERM (after releasing the local mutex) if the Redis hold
 * was lost; PTHREAD_PROCESS_SHARED is refused (ENOTSUP): the mutex is
 * already shared through Redis, and its state cannot live in shared
 * memory.
 *
 * Include it before any of the program's own headers that use
 * pthread_mutex_t (they then get the wrapper), and after any third-party
 * header that uses pthread_mutex_t with glibc's meaning inside its own
 * types or inline functions: the renaming holds for the rest of the
 * translation unit.  For C++, the standard library's headers are taken
 * care of here. */
#ifndef RMUTEX_PTHREAD_H
#define RMUTEX_PTHREAD_H

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <time.h>

#include <rmutex.h>

#ifdef __cplusplus
/* libstdc++'s headers embed glibc's pthread_mutex_t in their own types (via
 * gthr: std::mutex, std::basic_filebuf, ...) and call pthread_cond_* with
 * it: they must be read before the renaming below.  Including these pulls
 * in all of that, so a C++ translation unit may include this header
 * first. */
#include <condition_variable>
#include <mutex>
#include <thread>
#if __cplusplus >= 201402L
#include <shared_mutex>
#endif

extern "C" {
#endif

#ifndef RMUTEX_PTHREAD_PREFIX
#define RMUTEX_PTHREAD_PREFIX ""
#endif

/* ---- types (fields private) --------------------------------------------- */

typedef struct rmutex_pthread_mutex {
    rmutex_t rm_mutex_;         /* the Redis lock */
    pthread_mutex_t rm_local_;  /* glibc's mutex */
    uintptr_t rm_dm_[3];        /* bookkeeping of the two (shim/dmutex.h) */
} rmutex_pthread_mutex_t;

typedef struct rmutex_pthread_cond {
    rcond_t rm_cond_;           /* the distributed condition */
    uintptr_t rm_local_only_;   /* 1: no name (zero-filled, in no symbol) */
    pthread_cond_t rm_local_;   /* glibc's, for waits with a mutex that has no name */
} rmutex_pthread_cond_t;

typedef struct rmutex_pthread_mutexattr {
    pthread_mutexattr_t rm_attr_;
    const char *rm_name_;
    int rm_fair_;
    int rm_cache_;              /* -1: as RMUTEX_CACHE says; 0 or 1 */
    unsigned long rm_lease_ms_;
} rmutex_pthread_mutexattr_t;

typedef struct rmutex_pthread_rwlock {
    rrwlock_t rm_rwlock_;           /* the distributed read-write lock */
    uintptr_t rm_local_only_;   /* 1: no name (zero-filled, in no symbol): rm_local_ alone */
    pthread_rwlock_t rm_local_; /* glibc's, for that case */
} rmutex_pthread_rwlock_t;

/* A spinlock is a distributed non-fair mutex (shim/pthread_spin.c). */
typedef rmutex_pthread_mutex_t rmutex_pthread_spinlock_t;

typedef struct rmutex_pthread_rwlockattr {
    pthread_rwlockattr_t rm_attr_;
    const char *rm_name_;
    unsigned long rm_lease_ms_;
} rmutex_pthread_rwlockattr_t;

typedef struct rmutex_pthread_sem {
    rsem_t rm_sem_;             /* the distributed semaphore */
    uintptr_t rm_local_only_;   /* 1: no name (heap or stack memory): rm_local_ alone */
    sem_t rm_local_;            /* glibc's, for that case */
    uintptr_t rm_opened_;       /* sem_open's: the process's open count */
} rmutex_pthread_sem_t;

typedef struct rmutex_pthread_barrier {
    rbarrier_t rm_barrier_;       /* the distributed barrier */
    uintptr_t rm_local_only_;     /* 1: no name: rm_local_ alone */
    pthread_barrier_t rm_local_;  /* glibc's, for that case */
} rmutex_pthread_barrier_t;

typedef struct rmutex_pthread_once {
    ronce_t rm_once_;             /* named: once for every process */
    pthread_once_t rm_local_;     /* not named: glibc's, once per process */
} rmutex_pthread_once_t;

/* ---- static initializers ------------------------------------------------ */

#define RMUTEX_PTHREAD_STR2_(x) #x
#define RMUTEX_PTHREAD_STR_(x) RMUTEX_PTHREAD_STR2_(x)
/* The default name: "<prefix><file>:<line>". */
#define RMUTEX_PTHREAD_SITE RMUTEX_PTHREAD_PREFIX __FILE__ ":" RMUTEX_PTHREAD_STR_(__LINE__)

#ifdef __PTHREAD_MUTEX_INITIALIZER /* glibc */
#define RMUTEX_PTHREAD_LOCAL_INIT_(type) { { __PTHREAD_MUTEX_INITIALIZER(type) } }
#else
#error "rmutex/pthread.h supports glibc's pthread_mutex_t only"
#endif

/* type: 0 normal, 1 recursive, 2 errorcheck (glibc's values); flags:
 * RMUTEX_FLAG_FAIR or 0. */
#define RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED_NP(name, type, flags)                  \
    { RMUTEX_INITIALIZER_NP(name, RMUTEX_RECURSIVE, flags), RMUTEX_PTHREAD_LOCAL_INIT_(type), \
      { 0, 0, 0 } }
#define RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED(name) \
    RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED_NP(name, 0, 0)

/* glibc's PTHREAD_COND_INITIALIZER (2.25 and later: the one layout the
 * header can name, since the macro is redefined below). */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 25)
#define RMUTEX_PTHREAD_COND_LOCAL_INIT_ { { {0}, {0}, {0, 0}, {0, 0}, 0, 0, {0, 0} } }
#else
#error "rmutex/pthread.h needs glibc 2.25 or later"
#endif
#define RMUTEX_PTHREAD_COND_INITIALIZER_NAMED(name) \
    { RCOND_INITIALIZER(name), 0, RMUTEX_PTHREAD_COND_LOCAL_INIT_ }

/* kind: glibc's PTHREAD_RWLOCK_*_NP (0 prefer readers, 2 writers do not
 * starve). */
#define RMUTEX_PTHREAD_RWLOCK_INITIALIZER_NAMED_NP(name, kind) \
    { RRWLOCK_INITIALIZER_NP(name, kind, 0), 0, { { __PTHREAD_RWLOCK_INITIALIZER(kind) } } }
#define RMUTEX_PTHREAD_RWLOCK_INITIALIZER_NAMED(name) \
    RMUTEX_PTHREAD_RWLOCK_INITIALIZER_NAMED_NP(name, PTHREAD_RWLOCK_DEFAULT_NP)

#define RMUTEX_PTHREAD_ONCE_INIT_NAMED(name) { RONCE_INIT(name), 0 }

/* ---- the functions the macros below lead to ------------------------------ */

int rmutex_pthread_mutex_init(rmutex_pthread_mutex_t *m, const rmutex_pthread_mutexattr_t *attr,
                              const char *site);
int rmutex_pthread_mutex_destroy(rmutex_pthread_mutex_t *m);
int rmutex_pthread_mutex_lock(rmutex_pthread_mutex_t *m);
int rmutex_pthread_mutex_trylock(rmutex_pthread_mutex_t *m);
int rmutex_pthread_mutex_timedlock(rmutex_pthread_mutex_t *m, const struct timespec *abstime);
int rmutex_pthread_mutex_clocklock(rmutex_pthread_mutex_t *m, clockid_t clock,
                                   const struct timespec *abstime);
int rmutex_pthread_mutex_unlock(rmutex_pthread_mutex_t *m);
int rmutex_pthread_mutex_consistent(rmutex_pthread_mutex_t *m);
int rmutex_pthread_mutex_getprioceiling(const rmutex_pthread_mutex_t *m, int *ceiling);
int rmutex_pthread_mutex_setprioceiling(rmutex_pthread_mutex_t *m, int ceiling, int *old);

int rmutex_pthread_mutexattr_init(rmutex_pthread_mutexattr_t *a);
int rmutex_pthread_mutexattr_destroy(rmutex_pthread_mutexattr_t *a);
int rmutex_pthread_mutexattr_settype(rmutex_pthread_mutexattr_t *a, int type);
int rmutex_pthread_mutexattr_gettype(const rmutex_pthread_mutexattr_t *a, int *type);
int rmutex_pthread_mutexattr_setrobust(rmutex_pthread_mutexattr_t *a, int robust);
int rmutex_pthread_mutexattr_getrobust(const rmutex_pthread_mutexattr_t *a, int *robust);
int rmutex_pthread_mutexattr_setpshared(rmutex_pthread_mutexattr_t *a, int pshared);
int rmutex_pthread_mutexattr_getpshared(const rmutex_pthread_mutexattr_t *a, int *pshared);
int rmutex_pthread_mutexattr_setprotocol(rmutex_pthread_mutexattr_t *a, int protocol);
int rmutex_pthread_mutexattr_getprotocol(const rmutex_pthread_mutexattr_t *a, int *protocol);
int rmutex_pthread_mutexattr_setprioceiling(rmutex_pthread_mutexattr_t *a, int ceiling);
int rmutex_pthread_mutexattr_getprioceiling(const rmutex_pthread_mutexattr_t *a, int *ceiling);

/* Extensions.  setname: the lock name (copied by pthread_mutex_init; NULL:
 * back to the call site's name).  setfair, setcache: 0 or 1.  setlease: as
 * rmutexattr_setlease.  Return 0 or EINVAL. */
int rmutex_pthread_mutexattr_setname(rmutex_pthread_mutexattr_t *a, const char *name);
int rmutex_pthread_mutexattr_setfair(rmutex_pthread_mutexattr_t *a, int fair);
int rmutex_pthread_mutexattr_setlease(rmutex_pthread_mutexattr_t *a, unsigned long lease_ms);
int rmutex_pthread_mutexattr_setcache(rmutex_pthread_mutexattr_t *a, int cache);

int rmutex_pthread_cond_init(rmutex_pthread_cond_t *c, const pthread_condattr_t *attr,
                             const char *site);
int rmutex_pthread_cond_init_named(rmutex_pthread_cond_t *c, const pthread_condattr_t *attr,
                                   const char *name);
int rmutex_pthread_cond_destroy(rmutex_pthread_cond_t *c);
int rmutex_pthread_cond_signal(rmutex_pthread_cond_t *c);
int rmutex_pthread_cond_broadcast(rmutex_pthread_cond_t *c);
int rmutex_pthread_cond_wait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m);
int rmutex_pthread_cond_timedwait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m,
                                  const struct timespec *abstime);
int rmutex_pthread_cond_clockwait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m, clockid_t clock,
                                  const struct timespec *abstime);

int rmutex_pthread_rwlock_init(rmutex_pthread_rwlock_t *l, const rmutex_pthread_rwlockattr_t *attr,
                               const char *site);
int rmutex_pthread_rwlock_destroy(rmutex_pthread_rwlock_t *l);
int rmutex_pthread_rwlock_rdlock(rmutex_pthread_rwlock_t *l);
int rmutex_pthread_rwlock_tryrdlock(rmutex_pthread_rwlock_t *l);
int rmutex_pthread_rwlock_timedrdlock(rmutex_pthread_rwlock_t *l, const struct timespec *abstime);
int rmutex_pthread_rwlock_clockrdlock(rmutex_pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime);
int rmutex_pthread_rwlock_wrlock(rmutex_pthread_rwlock_t *l);
int rmutex_pthread_rwlock_trywrlock(rmutex_pthread_rwlock_t *l);
int rmutex_pthread_rwlock_timedwrlock(rmutex_pthread_rwlock_t *l, const struct timespec *abstime);
int rmutex_pthread_rwlock_clockwrlock(rmutex_pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime);
int rmutex_pthread_rwlock_unlock(rmutex_pthread_rwlock_t *l);

int rmutex_pthread_rwlockattr_init(rmutex_pthread_rwlockattr_t *a);
int rmutex_pthread_rwlockattr_destroy(rmutex_pthread_rwlockattr_t *a);
int rmutex_pthread_rwlockattr_setkind_np(rmutex_pthread_rwlockattr_t *a, int kind);
int rmutex_pthread_rwlockattr_getkind_np(const rmutex_pthread_rwlockattr_t *a, int *kind);
int rmutex_pthread_rwlockattr_setpshared(rmutex_pthread_rwlockattr_t *a, int pshared);
int rmutex_pthread_rwlockattr_getpshared(const rmutex_pthread_rwlockattr_t *a, int *pshared);
/* Extensions: the lock name (copied by pthread_rwlock_init; NULL: the call
 * site's), a fixed lease (rrwlockattr_setlease).  0 or EINVAL. */
int rmutex_pthread_rwlockattr_setname(rmutex_pthread_rwlockattr_t *a, const char *name);
int rmutex_pthread_rwlockattr_setlease(rmutex_pthread_rwlockattr_t *a, unsigned long lease_ms);

/* Spinlocks: named by the symbol they live in, else pthread_spin_init's
 * call site; PTHREAD_PROCESS_SHARED is ENOTSUP (shared through Redis
 * already).  A relock by the holder never returns, as glibc's spins. */
int rmutex_pthread_spin_init(rmutex_pthread_spinlock_t *s, int pshared, const char *site);
int rmutex_pthread_spin_destroy(rmutex_pthread_spinlock_t *s);
int rmutex_pthread_spin_lock(rmutex_pthread_spinlock_t *s);
int rmutex_pthread_spin_trylock(rmutex_pthread_spinlock_t *s);
int rmutex_pthread_spin_unlock(rmutex_pthread_spinlock_t *s);

/* Semaphores: sem_init names one in a symbol by the symbol, else it stays
 * process-local (said once); _named gives it a name.  -1 and errno, as
 * POSIX's. */
int rmutex_pthread_sem_init(rmutex_pthread_sem_t *s, int pshared, unsigned value);
int rmutex_pthread_sem_init_named(rmutex_pthread_sem_t *s, const char *name, unsigned value);
int rmutex_pthread_sem_destroy(rmutex_pthread_sem_t *s);
int rmutex_pthread_sem_wait(rmutex_pthread_sem_t *s);
int rmutex_pthread_sem_trywait(rmutex_pthread_sem_t *s);
int rmutex_pthread_sem_timedwait(rmutex_pthread_sem_t *s, const struct timespec *abstime);
int rmutex_pthread_sem_clockwait(rmutex_pthread_sem_t *s, clockid_t clock,
                                 const struct timespec *abstime);
/* A post from a signal handler that interrupted this library (a wait of
 * the same thread, the common case of a handler that wakes a sem_wait)
 * only hands the post to a library thread, with async-signal-safe calls;
 * one that interrupted other code posts over the network from the handler
 * (do not post from a handler that may interrupt malloc: use
 * rsem_post_signal, rmutex.h). */
int rmutex_pthread_sem_post(rmutex_pthread_sem_t *s);
int rmutex_pthread_sem_getvalue(rmutex_pthread_sem_t *s, int *value);
rmutex_pthread_sem_t *rmutex_pthread_sem_open(const char *name, int oflag, ...);
int rmutex_pthread_sem_close(rmutex_pthread_sem_t *s);
int rmutex_pthread_sem_unlink(const char *name);

/* Barriers: named by their symbol, else process-local (said once); _named
 * gives one a name.  pthread_barrier_wait: 0, PTHREAD_BARRIER_SERIAL_THREAD,
 * or EOWNERDEAD when a member died and broke the generation (said once). */
int rmutex_pthread_barrier_init(rmutex_pthread_barrier_t *b, const pthread_barrierattr_t *attr,
                                unsigned count);
int rmutex_pthread_barrier_init_named(rmutex_pthread_barrier_t *b, const char *name, unsigned count);
int rmutex_pthread_barrier_destroy(rmutex_pthread_barrier_t *b);
int rmutex_pthread_barrier_wait(rmutex_pthread_barrier_t *b);

int rmutex_pthread_once(rmutex_pthread_once_t *once, void (*routine)(void));

#ifdef __cplusplus
}
#endif

/* ---- the swap ------------------------------------------------------------ */

#ifndef RMUTEX_PTHREAD_NO_MACROS

#define pthread_mutex_t rmutex_pthread_mutex_t
#define pthread_mutexattr_t rmutex_pthread_mutexattr_t

#undef PTHREAD_MUTEX_INITIALIZER
#define PTHREAD_MUTEX_INITIALIZER RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED_NP(RMUTEX_PTHREAD_SITE, 0, 0)
#ifdef PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#undef PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#define PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP \
    RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED_NP(RMUTEX_PTHREAD_SITE, 1, 0)
#endif
#ifdef PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP
#undef PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP
#define PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP \
    RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED_NP(RMUTEX_PTHREAD_SITE, 2, 0)
#endif
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
#undef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
#define PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP \
    RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED_NP(RMUTEX_PTHREAD_SITE, 3, 0)
#endif

#define pthread_mutex_init(m, attr) rmutex_pthread_mutex_init((m), (attr), RMUTEX_PTHREAD_SITE)
#define pthread_mutex_destroy rmutex_pthread_mutex_destroy
#define pthread_mutex_lock rmutex_pthread_mutex_lock
#define pthread_mutex_trylock rmutex_pthread_mutex_trylock
#define pthread_mutex_timedlock rmutex_pthread_mutex_timedlock
#define pthread_mutex_clocklock rmutex_pthread_mutex_clocklock
#define pthread_mutex_unlock rmutex_pthread_mutex_unlock
#define pthread_mutex_consistent rmutex_pthread_mutex_consistent
#define pthread_mutex_consistent_np rmutex_pthread_mutex_consistent
#define pthread_mutex_getprioceiling rmutex_pthread_mutex_getprioceiling
#define pthread_mutex_setprioceiling rmutex_pthread_mutex_setprioceiling

#define pthread_mutexattr_init rmutex_pthread_mutexattr_init
#define pthread_mutexattr_destroy rmutex_pthread_mutexattr_destroy
#define pthread_mutexattr_settype rmutex_pthread_mutexattr_settype
#define pthread_mutexattr_gettype rmutex_pthread_mutexattr_gettype
#define pthread_mutexattr_setrobust rmutex_pthread_mutexattr_setrobust
#define pthread_mutexattr_getrobust rmutex_pthread_mutexattr_getrobust
#define pthread_mutexattr_setrobust_np rmutex_pthread_mutexattr_setrobust
#define pthread_mutexattr_getrobust_np rmutex_pthread_mutexattr_getrobust
#define pthread_mutexattr_setpshared rmutex_pthread_mutexattr_setpshared
#define pthread_mutexattr_getpshared rmutex_pthread_mutexattr_getpshared
#define pthread_mutexattr_setprotocol rmutex_pthread_mutexattr_setprotocol
#define pthread_mutexattr_getprotocol rmutex_pthread_mutexattr_getprotocol
#define pthread_mutexattr_setprioceiling rmutex_pthread_mutexattr_setprioceiling
#define pthread_mutexattr_getprioceiling rmutex_pthread_mutexattr_getprioceiling

#undef PTHREAD_COND_INITIALIZER
#define PTHREAD_COND_INITIALIZER RMUTEX_PTHREAD_COND_INITIALIZER_NAMED(RMUTEX_PTHREAD_SITE)
#define pthread_cond_t rmutex_pthread_cond_t
#define pthread_cond_init(c, attr) rmutex_pthread_cond_init((c), (attr), RMUTEX_PTHREAD_SITE)
#define pthread_cond_destroy rmutex_pthread_cond_destroy
#define pthread_cond_signal rmutex_pthread_cond_signal
#define pthread_cond_broadcast rmutex_pthread_cond_broadcast
#define pthread_cond_wait rmutex_pthread_cond_wait
#define pthread_cond_timedwait rmutex_pthread_cond_timedwait
#define pthread_cond_clockwait rmutex_pthread_cond_clockwait

#define pthread_rwlock_t rmutex_pthread_rwlock_t
#define pthread_rwlockattr_t rmutex_pthread_rwlockattr_t
#undef PTHREAD_RWLOCK_INITIALIZER
#define PTHREAD_RWLOCK_INITIALIZER \
    RMUTEX_PTHREAD_RWLOCK_INITIALIZER_NAMED_NP(RMUTEX_PTHREAD_SITE, PTHREAD_RWLOCK_DEFAULT_NP)
#ifdef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
#undef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
#define PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP \
    RMUTEX_PTHREAD_RWLOCK_INITIALIZER_NAMED_NP(RMUTEX_PTHREAD_SITE,  \
                                               PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)
#endif
#define pthread_rwlock_init(l, attr) rmutex_pthread_rwlock_init((l), (attr), RMUTEX_PTHREAD_SITE)
#define pthread_rwlock_destroy rmutex_pthread_rwlock_destroy
#define pthread_rwlock_rdlock rmutex_pthread_rwlock_rdlock
#define pthread_rwlock_tryrdlock rmutex_pthread_rwlock_tryrdlock
#define pthread_rwlock_timedrdlock rmutex_pthread_rwlock_timedrdlock
#define pthread_rwlock_clockrdlock rmutex_pthread_rwlock_clockrdlock
#define pthread_rwlock_wrlock rmutex_pthread_rwlock_wrlock
#define pthread_rwlock_trywrlock rmutex_pthread_rwlock_trywrlock
#define pthread_rwlock_timedwrlock rmutex_pthread_rwlock_timedwrlock
#define pthread_rwlock_clockwrlock rmutex_pthread_rwlock_clockwrlock
#define pthread_rwlock_unlock rmutex_pthread_rwlock_unlock
#define pthread_rwlockattr_init rmutex_pthread_rwlockattr_init
#define pthread_rwlockattr_destroy rmutex_pthread_rwlockattr_destroy
#define pthread_rwlockattr_setkind_np rmutex_pthread_rwlockattr_setkind_np
#define pthread_rwlockattr_getkind_np rmutex_pthread_rwlockattr_getkind_np
#define pthread_rwlockattr_setpshared rmutex_pthread_rwlockattr_setpshared
#define pthread_rwlockattr_getpshared rmutex_pthread_rwlockattr_getpshared

#define pthread_spinlock_t rmutex_pthread_spinlock_t
#define pthread_spin_init(s, pshared) rmutex_pthread_spin_init((s), (pshared), RMUTEX_PTHREAD_SITE)
#define pthread_spin_destroy rmutex_pthread_spin_destroy
#define pthread_spin_lock rmutex_pthread_spin_lock
#define pthread_spin_trylock rmutex_pthread_spin_trylock
#define pthread_spin_unlock rmutex_pthread_spin_unlock

#define sem_t rmutex_pthread_sem_t
#undef SEM_FAILED
#define SEM_FAILED ((rmutex_pthread_sem_t *)0)
#define sem_init rmutex_pthread_sem_init
#define sem_destroy rmutex_pthread_sem_destroy
#define sem_wait rmutex_pthread_sem_wait
#define sem_trywait rmutex_pthread_sem_trywait
#define sem_timedwait rmutex_pthread_sem_timedwait
#define sem_clockwait rmutex_pthread_sem_clockwait
#define sem_post rmutex_pthread_sem_post
#define sem_getvalue rmutex_pthread_sem_getvalue
#define sem_open rmutex_pthread_sem_open
#define sem_close rmutex_pthread_sem_close
#define sem_unlink rmutex_pthread_sem_unlink

#define pthread_barrier_t rmutex_pthread_barrier_t
#define pthread_barrier_init rmutex_pthread_barrier_init
#define pthread_barrier_destroy rmutex_pthread_barrier_destroy
#define pthread_barrier_wait rmutex_pthread_barrier_wait

#define pthread_once_t rmutex_pthread_once_t
#undef PTHREAD_ONCE_INIT
#define PTHREAD_ONCE_INIT { RONCE_INIT(0), 0 }
#define pthread_once rmutex_pthread_once

#endif /* RMUTEX_PTHREAD_NO_MACROS */

#endif /* RMUTEX_PTHREAD_H */
