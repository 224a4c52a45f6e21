/* fuzz_pubsub.c -- any bytes on the pub/sub connection.  The multiplexer's
 * own code (src/net/sub.c, included here to reach its reply dispatch) gets the
 * replies hiredis parses from the input, with waiters joined on two
 * channels (one matching its own messages, one taking "0"): messages,
 * (un)subscribe confirmations, PONGs, error replies (NOPERM) and anything
 * else must wake the right waiters or nobody -- never crash or leak.  No
 * thread is started: the test plays the multiplexer thread. */
#include "../src/net/sub.c"

#include <stdint.h>

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_sane_lengths(data, size)) return 0;
    static struct rm_server_addr addr;
    struct rm_reach reach = { NULL, NULL };
    struct rm_topo_hook hook = { NULL, NULL };
    struct rm_sub *s;
    /* The first byte picks plain or sharded pub/sub. */
    int sharded = size > 0 && (data[0] & 1);
    if (rm_sub_create(&addr, reach, sharded, hook, &s)) return 0;
    s->started = 1; /* joins must not start the thread */
    struct rm_waiter a, b;
    if (rm_sub_join(s, "redisson_lock__channel:{x}", &a, NULL, 0) ||
        rm_sub_join(s, "rmutex_fair_channel:{x}:u", &b, "u:1|2", 5))
        abort();
    /* As if sync_channels had sent the SUBSCRIBE. */
    for (size_t i = 0; i < NBUCKETS; i++)
        for (struct rm_channel *ch = s->bucket[i]; ch; ch = ch->hnext) ch->state = CH_SENT;

    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, (const char *)data, size);
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply) break;
        pthread_mutex_lock(&s->mu);
        dispatch(s, reply);
        pthread_mutex_unlock(&s->mu);
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    if (a.woken < 0 || a.woken > RM_WAKE_MOVED || b.woken < 0 || b.woken > RM_WAKE_MOVED) abort();
    rm_sub_leave(&a);
    rm_sub_leave(&b);
    s->started = 0;
    rm_sub_destroy(s);
    return 0;
}
