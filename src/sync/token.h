/* token.h -- fencing tokens, taken in Redis for a hold that asks. */
#ifndef RM_TOKEN_H
#define RM_TOKEN_H

#include <stddef.h>
#include <stdint.h>

struct rm_endpoint;

/* Take count tokens for acquisition acq of owner's hold of the lock hash
 * lock, from the counter token,
 * while that hold is in Redis (fence.lua); *token is the last of them.
 * Returns 0, EPERM (with the detail) when the hold is gone, ETIMEDOUT when
 * Redis did not answer within the command timeout, or an error reply's
 * errno. */
int rm_token_take(struct rm_endpoint *ep, const char *lock, const char *token_key,
                  const char *owner, size_t owner_len, uint64_t acq, unsigned count,
                  uint64_t *token);

#endif
