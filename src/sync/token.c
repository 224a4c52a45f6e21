/* token.c -- fencing tokens: taken when a holder first asks for one, not
 * at every acquisition.  fence.lua raises the name's counter only while
 * the asking hold is in Redis, so every later holder that asks gets a
 * greater number; never below the server's clock in microseconds, so
 * that holds after a data loss do too (lua/lib/token.lua).  A cache takes
 * a range at a time for its threads' holds (cache.c). */
#include "token.h"
#include "call.h"
#include "internal.h"
#include "script.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

int rm_token_take(struct rm_endpoint *ep, const char *lock, const char *token_key,
                  const char *owner, size_t owner_len, uint64_t acq, unsigned count,
                  uint64_t *token)
{
    int r;
    char acqs[24], counts[16];
    snprintf(acqs, sizeof acqs, "%llu", (unsigned long long)acq);
    snprintf(counts, sizeof counts, "%u", count);
    const char *argv[] = { lock, token_key, owner, acqs, counts };
    size_t lens[] = { strlen(argv[0]), strlen(argv[1]), owner_len, strlen(acqs), strlen(counts) };
    /* An INCR whose reply was lost only skips numbers: asked again. */
    redisReply *reply;
    if ((r = rm_call_retried(ep, RM_SCRIPT_FENCE, 2, 5, argv, lens, &reply))) return r;
    if (reply->type != REDIS_REPLY_INTEGER) {
        rm_detail("unexpected reply from fence.lua");
        r = EIO;
    } else if (reply->integer <= 0) {
        rm_detail("%s is not held by this thread in Redis (its lease ran out, or it was "
                  "force-unlocked)", lock);
        r = EPERM;
    } else {
        *token = (uint64_t)reply->integer;
    }
    freeReplyObject(reply);
    return r;
}
