/* deadlock.h -- a waiting thread asks whether its wait closes a cycle of
 * waits across processes (rmutexattr_setdeadlock_detect). */
#ifndef RM_DEADLOCK_H
#define RM_DEADLOCK_H

#include "clock.h"

struct rm_endpoint;

/* How long every wait of a cycle must have lasted before a detecting
 * thread gives up: twice announce_wait and one announcement period (each
 * member's wait is then surely in the registry, renewed). */
rm_nsec rm_deadlock_threshold(void);

/* 1 when the thread owner, waiting for lock for waited ns, closes a cycle
 * of waits (it waits for a lock whose holder waits for a lock whose holder
 * ... holds lock) whose every wait has lasted rm_deadlock_threshold, and
 * it is the one of the cycle to give up: the youngest wait of the members
 * that detect.  The detail then names the cycle.  0 otherwise, also when
 * Redis could not be asked. */
int rm_deadlock_closed(struct rm_endpoint *ep, const char *lock, const char *owner, rm_nsec waited);

#endif
