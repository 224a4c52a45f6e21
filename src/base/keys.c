/* keys.c -- lock names and the keys derived from them.
 *
 * Redisson derives a lock's other keys with prefixName(prefix, name):
 * "prefix:{name}" when the name has no '{', else "prefix:name", trusting the
 * user's own hash tag.  The lock key is the bare name.  In Redis Cluster all
 * of them must hash to one slot, because every script touches several; a
 * name whose braces break that ("a{b", "{}x", "a}b") is refused, since
 * Redisson would hit CROSSSLOT on it.  We compare the hashed part (the tag,
 * or the whole key) of the lock key and of a derived key. */
#include "keys.h"
#include "clock.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The part of key that Redis Cluster hashes: the first {tag} if it is not
 * empty, else the whole key. */
static void hashed_part(const char *key, size_t len, const char **p, size_t *n)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
        if (close && close > open + 1) {
            *p = open + 1;
            *n = (size_t)(close - open - 1);
            return;
        }
    }
    *p = key;
    *n = len;
}

/* CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis
 * Cluster hashes keys with, one bit at a time: a key is hashed once per
 * call, and a table would be 512 bytes of data for nothing measurable. */
static unsigned crc16(const char *s, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    }
    return crc & 0xffff;
}

int rm_keys_slot(const char *key, size_t len)
{
    const char *p;
    size_t n;
    hashed_part(key, len, &p, &n);
    return (int)(crc16(p, n) & (RM_SLOTS - 1));
}

static const char *const lock_prefixes[] = {
    "redisson_lock__channel", "redisson_lock_token", "rmutex_owner",
    "rmutex_notrecoverable", "rmutex_fair_queue",
    "rmutex_fair_alive", "rmutex_fair_seq", "rmutex_fair_channel", "rmutex_fair_lease",
};
#define NLOCK (sizeof lock_prefixes / sizeof lock_prefixes[0])

static const char *const cond_prefixes[] = {
    "rmutex_cond", "rmutex_cond_wait", "rmutex_cond_alive", "rmutex_cond_channel",
};
#define NCOND (sizeof cond_prefixes / sizeof cond_prefixes[0])

static const char *const rw_prefixes[] = {
    "rmutex_rw_readers", "rmutex_rw_queue", "rmutex_rw_writers", "rmutex_rw_alive",
    "rmutex_rw_seq", "rmutex_rw_owner", "redisson_rwlock", "rmutex_rw_holds",
    "redisson_lock_token",
};
#define NRW (sizeof rw_prefixes / sizeof rw_prefixes[0])

static const char *const sem_prefixes[] = {
    "rmutex_sem", "rmutex_sem_leases", "rmutex_sem_held", "rmutex_sem_queue", "rmutex_sem_alive",
    "rmutex_sem_seq", "rmutex_sem_lost", "rmutex_sem_grant",
};
#define NSEM (sizeof sem_prefixes / sizeof sem_prefixes[0])
/* (The channel of a barrier, of a once, is its state key's name: another
 * namespace.) */
static const char *const barrier_prefixes[] = {
    "rmutex_barrier", "rmutex_barrier_parts", "rmutex_barrier_arrivals",
};
#define NBARRIER (sizeof barrier_prefixes / sizeof barrier_prefixes[0])

static const char *const once_prefixes[] = { "rmutex_once", "rmutex_once_run" };
#define NONCE (sizeof once_prefixes / sizeof once_prefixes[0])

/* Check name (what names it: "lock", "condition") and derive its keys:
 * out[0] the bare name, out[i + 1] "prefixes[i]:{name}" (or ":name" when
 * the name brings its own tag), all in one allocation, *buf. */
static int derive(const char *what, const char *name, const char *const *prefixes, size_t n,
                  const char **out, char **buf_out, int *slot)
{
    if (!name) { rm_detail("the %s name is NULL", what); return EINVAL; }
    size_t len = strlen(name);
    if (len == 0) { rm_detail("the %s name is empty", what); return EINVAL; }
    if (len > RMUTEX_NAME_MAX) {
        rm_detail("the %s name is %zu bytes; at most %d are allowed", what, len, RMUTEX_NAME_MAX);
        return EINVAL;
    }
    int tagged = memchr(name, '{', len) != NULL;
    size_t total = len + 1;
    for (size_t i = 0; i < n; i++) total += strlen(prefixes[i]) + len + 4;
    char *buf = malloc(total), *p = buf;
    if (!buf) { rm_detail("out of memory"); return ENOMEM; }

    memcpy(p, name, len + 1);
    out[0] = p;
    p += len + 1;
    for (size_t i = 0; i < n; i++) {
        out[i + 1] = p;
        p += sprintf(p, tagged ? "%s:%s" : "%s:{%s}", prefixes[i], name) + 1;
    }

    const char *a, *b;
    size_t an, bn;
    hashed_part(name, len, &a, &an);
    hashed_part(out[1], strlen(out[1]), &b, &bn);
    if (an != bn || memcmp(a, b, an)) {
        free(buf);
        rm_detail("the braces in the %s name would put its keys in different cluster slots; "
                  "use one non-empty {tag}", what);
        return EINVAL;
    }
    *buf_out = buf;
    *slot = rm_keys_slot(name, len);
    return 0;
}

int rm_keys_make(const char *name, struct rm_keys *k)
{
    const char *out[NLOCK + 1];
    int r = derive("lock", name, lock_prefixes, NLOCK, out, &k->buf, &k->slot);
    if (r) return r;
    k->lock = out[0];
    k->channel = out[1];
    k->token = out[2];
    k->owner = out[3];
    k->notrec = out[4];
    k->queue = out[5];
    k->alive = out[6];
    k->seq = out[7];
    k->fchannel = out[8];
    k->lease = out[9];
    return 0;
}

int rm_keys_cond(const char *name, struct rm_cond_keys *k)
{
    const char *out[NCOND + 1];
    int r = derive("condition", name, cond_prefixes, NCOND, out, &k->buf, &k->slot);
    if (r) return r;
    k->name = out[0];
    k->state = out[1];
    k->wait = out[2];
    k->alive = out[3];
    k->channel = out[4];
    return 0;
}

int rm_keys_rwlock(const char *name, struct rm_rw_keys *k)
{
    const char *out[NRW + 1];
    int r = derive("read-write lock", name, rw_prefixes, NRW, out, &k->buf, &k->slot);
    if (r) return r;
    k->lock = out[0];
    k->readers = out[1];
    k->queue = out[2];
    k->writers = out[3];
    k->alive = out[4];
    k->seq = out[5];
    k->owner = out[6];
    k->channel = out[7];
    k->holds = out[8];
    k->token = out[9];
    /* Redisson's suffixName: "{NAME}" when the name has no tag, else NAME. */
    size_t len = strlen(name);
    k->tag_len = memchr(name, '{', len) ? len : len + 2;
    k->tagged = memchr(name, '{', len) != NULL;
    return 0;
}

int rm_keys_sem(const char *name, struct rm_sem_keys *k)
{
    const char *out[NSEM + 1];
    int r = derive("semaphore", name, sem_prefixes, NSEM, out, &k->buf, &k->slot);
    if (r) return r;
    k->name = out[0];
    k->sem = out[1];
    k->leases = out[2];
    k->held = out[3];
    k->queue = out[4];
    k->alive = out[5];
    k->seq = out[6];
    k->lost = out[7];
    k->grant = out[8];
    return 0;
}

int rm_keys_barrier(const char *name, struct rm_barrier_keys *k)
{
    const char *out[NBARRIER + 1];
    int r = derive("barrier", name, barrier_prefixes, NBARRIER, out, &k->buf, &k->slot);
    if (r) return r;
    k->name = out[0];
    k->state = k->channel = out[1];
    k->parts = out[2];
    k->arrived = out[3];
    return 0;
}

int rm_keys_once(const char *name, struct rm_once_keys *k)
{
    const char *out[NONCE + 1];
    int r = derive("once", name, once_prefixes, NONCE, out, &k->buf, &k->slot);
    if (r) return r;
    k->name = out[0];
    k->done = k->channel = out[1];
    k->run = out[2];
    return 0;
}

size_t rm_keys_rw_process(const struct rm_rw_keys *k, const char *uuid, size_t uuid_len,
                          char *holds, char *timeout, size_t size)
{
    size_t hl = strlen(k->holds);
    size_t need = rm_clock_max(hl + 1 + uuid_len, k->tag_len + 1 + uuid_len + 20) + 1;
    if (need > size) return 0;
    memcpy(holds, k->holds, hl);
    holds[hl] = ':';
    memcpy(holds + hl + 1, uuid, uuid_len);
    holds[hl + 1 + uuid_len] = 0;
    snprintf(timeout, size, k->tagged ? "%s:%.*s:r:rwlock_timeout:1" : "{%s}:%.*s:r:rwlock_timeout:1",
             k->lock, (int)uuid_len, uuid);
    return need;
}

void rm_keys_rw_free(struct rm_rw_keys *k)
{
    free(k->buf);
    k->buf = NULL;
}

void rm_keys_free(struct rm_keys *k)
{
    free(k->buf);
    k->buf = NULL;
}
