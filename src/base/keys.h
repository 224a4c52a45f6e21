/* keys.h -- a lock name's Redis keys and channel. */
#ifndef RM_KEYS_H
#define RM_KEYS_H

#include <stddef.h>

/* Every key and channel of one lock, derived from its name as Redisson's
 * prefixName derives them, so that all share one cluster slot. */
struct rm_keys {
    const char *lock;    /* NAME: the hash, field <owner> = the acquisition's number */
    const char *channel; /* redisson_lock__channel:{NAME}: "0" on release */
    const char *token;   /* redisson_lock_token:{NAME}: fencing counter, no TTL */
    const char *owner;   /* rmutex_owner:{NAME}: a robust or handed-off holder, outlives it by a lease */
    const char *notrec;  /* rmutex_notrecoverable:{NAME}: robust state is lost */
    /* The fair lock's own (fair.lua): */
    const char *queue;   /* rmutex_fair_queue:{NAME}: zset waiter -> ticket */
    const char *alive;   /* rmutex_fair_alive:{NAME}: zset waiter -> liveness deadline */
    const char *seq;     /* rmutex_fair_seq:{NAME}: ticket counter */
    const char *fchannel; /* rmutex_fair_channel:{NAME}: + ":<uuid>", a process's grants */
    const char *lease;   /* rmutex_fair_lease:{NAME}: hash waiter -> its hold lease ms */
    int slot;            /* the cluster slot of them all */
    char *buf;           /* one allocation holding the strings */
};

/* The Redis Cluster slot of key: CRC16 of its first non-empty {tag}, or of
 * the whole key, modulo RM_SLOTS. */
#define RM_SLOTS 16384
int rm_keys_slot(const char *key, size_t len);

/* Check name and derive its keys into *k.  Returns 0, or EINVAL (NULL,
 * empty, longer than RMUTEX_NAME_MAX, or braces that would split the keys
 * over two slots) or ENOMEM, with the detail set. */
int rm_keys_make(const char *name, struct rm_keys *k);
void rm_keys_free(struct rm_keys *k);

/* A condition variable's keys (cond.lua), derived from its name by the
 * same rules, so they share one slot (not, in general, the mutex's). */
struct rm_cond_keys {
    const char *name;    /* the condition's name */
    const char *state;   /* rmutex_cond:{NAME}: hash seq, bcast, mutex */
    const char *wait;    /* rmutex_cond_wait:{NAME}: zset waiter -> ticket */
    const char *alive;   /* rmutex_cond_alive:{NAME}: zset waiter -> deadline */
    const char *channel; /* rmutex_cond_channel:{NAME}: "s <waiter>", "* <bcast>" */
    int slot;
    char *buf;
};
int rm_keys_cond(const char *name, struct rm_cond_keys *k);

/* A read-write lock's keys (rwlock.lua), by the same rules; the lock hash
 * and the channel are Redisson's RReadWriteLock's. */
struct rm_rw_keys {
    const char *lock;    /* NAME: the hash, Redisson's layout (mode, fields) */
    const char *readers; /* rmutex_rw_readers:{NAME}: zset process -> read lease */
    const char *queue;   /* rmutex_rw_queue:{NAME}: zset waiter -> ticket */
    const char *writers; /* rmutex_rw_writers:{NAME}: the writers of the queue */
    const char *alive;   /* rmutex_rw_alive:{NAME}: zset waiter -> liveness deadline */
    const char *seq;     /* rmutex_rw_seq:{NAME}: ticket counter */
    const char *owner;   /* rmutex_rw_owner:{NAME}: the writer's mark */
    const char *channel; /* redisson_rwlock:{NAME}: "0", "1" (Redisson's), "-<id>" a waiter */
    const char *holds;   /* rmutex_rw_holds:{NAME}: + ":<uuid>", a process's read holds */
    const char *token;   /* redisson_lock_token:{NAME}: fencing counter */
    size_t tag_len;      /* Redisson's suffix base: "{NAME}" or NAME */
    int tagged;
    int slot;
    char *buf;
};
int rm_keys_rwlock(const char *name, struct rm_rw_keys *k);
void rm_keys_rw_free(struct rm_rw_keys *k);

/* A semaphore's keys (sem.lua), by the same rules. */
struct rm_sem_keys {
    const char *name;    /* the semaphore's name */
    const char *sem;     /* rmutex_sem:{NAME}: hash value; also the channel's name */
    const char *leases;  /* rmutex_sem_leases:{NAME}: zset process -> permit lease */
    const char *held;    /* rmutex_sem_held:{NAME}: hash process -> permits held */
    const char *queue;   /* rmutex_sem_queue:{NAME}: zset waiter -> ticket */
    const char *alive;   /* rmutex_sem_alive:{NAME}: zset waiter -> liveness deadline */
    const char *seq;     /* rmutex_sem_seq:{NAME}: ticket counter */
    const char *lost;    /* rmutex_sem_lost:{NAME}: hash process -> permits given back */
    const char *grant;   /* rmutex_sem_grant:{NAME}: + ":<id>", a wait's grant */
    int slot;
    char *buf;
};
int rm_keys_sem(const char *name, struct rm_sem_keys *k);

/* The keys of a process's read holds (uuid): its hash of holds and
 * Redisson's timeout key of its anchor, into holds and timeout (size bytes
 * each).  Returns the bytes needed, 0 when they do not fit. */
size_t rm_keys_rw_process(const struct rm_rw_keys *k, const char *uuid, size_t uuid_len,
                          char *holds, char *timeout, size_t size);

/* A barrier's keys (barrier.lua), by the same rules. */
struct rm_barrier_keys {
    const char *name;    /* the barrier's name */
    const char *state;   /* rmutex_barrier:{NAME}: hash count, gen, the outcomes */
    const char *parts;   /* rmutex_barrier_parts:{NAME}: zset process -> lease deadline */
    const char *arrived; /* rmutex_barrier_arrivals:{NAME}: zset arrival -> generation */
    const char *channel; /* rmutex_barrier:{NAME}: "* <generation> d|b" as one ends */
    int slot;
    char *buf;
};
int rm_keys_barrier(const char *name, struct rm_barrier_keys *k);

/* A once's keys (once.lua), by the same rules. */
struct rm_once_keys {
    const char *name;    /* the once's name */
    const char *done;    /* rmutex_once:{NAME}: "done", no TTL, once the routine ran */
    const char *run;     /* rmutex_once_run:{NAME}: zset runner -> lease deadline */
    const char *channel; /* rmutex_once:{NAME}: "* done", "* free" */
    int slot;
    char *buf;
};
int rm_keys_once(const char *name, struct rm_once_keys *k);

#endif
