/* policy.h -- what a ported program's distributed locks do, and say,
 * when rmutex cannot take a name (policy.c). */
#ifndef RM_POLICY_H
#define RM_POLICY_H

/* The kinds of lock the program has made distributed, which the lines
 * name ("distributed mutexes wait", "distributed read-write locks wait",
 * both): each acquisition tells its own (take.c), the shim what it lists.
 * Cheap once told (one atomic load). */
enum { RM_POLICY_MUTEXES = 1, RM_POLICY_RWLOCKS = 2, RM_POLICY_SEMAPHORES = 4, RM_POLICY_BARRIERS = 8 };
void rm_policy_uses(int kinds);

/* Redis answered (a name was taken, or found held elsewhere): an outage
 * is over.  Cheap while there is none (one atomic load). */
void rm_policy_answered(void);

/* No connection to Redis could be made (detail: rmutex_detail()): the
 * outage line, once per outage. */
void rm_policy_outage(const char *detail);

/* rmutex answered code, an error no pthread call returns (a bad URL, a
 * refused login, an ACL that refuses a command...): its line, once per
 * problem; with RMUTEX_ON_ERROR=abort the line and abort().  Returns (the
 * caller then waits and asks again) otherwise. */
void rm_policy_error(int code, const char *detail);

#endif
