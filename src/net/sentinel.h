/* sentinel.h -- asking Redis Sentinel which server is the primary. */
#ifndef RM_SENTINEL_H
#define RM_SENTINEL_H

#include <stddef.h>

#include "clock.h"
#include "config.h"

struct rm_conn;

/* What the sentinels say. */
struct rm_sentinel_answer {
    char host[64];
    unsigned port;
    unsigned replicas; /* replicas the sentinel sees up (not s_down, o_down, disconnected) */
};

/* Resolve svc's primary as the Sentinel client protocol says: the
 * sentinels in order (svc->seeds, each with a short connect timeout; the
 * one that answers moves to the front), SENTINEL get-master-addr-by-name,
 * then ROLE on the answer, which must say master.  Also counts its
 * replicas, and adds sentinels the answering one knows of (SENTINEL
 * SENTINELS) to svc->seeds.  Returns 0; RM_E_UNSENT (no sentinel
 * reachable), EACCES (none reachable, and one refused the login: the
 * sentinel_user/sentinel_password), ENOENT (no sentinel knows the master
 * name), EAGAIN (the
 * named server is unreachable or not a primary yet); the detail says
 * which. */
int rm_sentinel_resolve(struct rm_service *svc, struct rm_sentinel_answer *out);

/* Open a connection to the first reachable sentinel, subscribed to
 * +switch-master.  Returns 0 and *out, or RM_E_UNSENT. */
int rm_sentinel_watch(const struct rm_service *svc, struct rm_conn **out);

/* Read what the watch connection has: 1 if a +switch-master for svc's
 * master arrived, 0 if nothing did, RM_E_LOST if the connection broke. */
int rm_sentinel_switched(const struct rm_service *svc, struct rm_conn *c);

#endif
