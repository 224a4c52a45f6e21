/* registry.h -- the holder registry: who a lock's holder is, beyond its
 * owner id (rmutex status). */
#ifndef RM_REGISTRY_H
#define RM_REGISTRY_H

#include <stddef.h>

#include "internal.h"

struct redisReply;

/* At most this many holds are listed in one process's entry. */
#define RM_REGISTRY_HOLDS 100
/* The most field/value pairs rm_registry_describe gives. */
#define RM_REGISTRY_PAIRS 6

/* 0 when the environment says RMUTEX_ANNOUNCE=0 (read once per process). */
int rm_registry_enabled(void);

/* The registry key of the process whose owner id ("<uuid>:<tid>", or a
 * fair waiter's "<uuid>:<tid>|<acquisition>") is owner, into buf.  Returns
 * its length, 0 when owner has no such form or buf is too small. */
size_t rm_registry_key(const char *owner, char *buf, size_t size);

/* The text of a process's description. */
struct rm_registry_text {
    char host[256], pid[24], exe[256], cmd[256], start[24];
};

/* This process as announce.lua stores it: field/value pairs (host, pid,
 * exe, cmd, lib, start) into argv/lens, their text kept in *t.  Returns
 * the number of pairs. */
int rm_registry_describe(struct rm_registry_text *t, const char **argv, size_t *lens);

/* The watchdog's hook (rm_watchdog_on_hold), with its lock held: a hold
 * of owner on ep was added -- announce the process at once if it is its
 * first on ep, else within about a second. */
struct rm_endpoint;
void rm_registry_hold_added(struct rm_endpoint *ep, const char *owner, size_t owner_len);

/* whois.lua's reply into the holder fields of *info (server_time_ms must
 * be set).  Leaves them unknown when the reply says nothing. */
void rm_registry_read(const struct redisReply *r, rmutex_lockinfo_t *info);

#endif
