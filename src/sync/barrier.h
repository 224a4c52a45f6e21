/* barrier.h -- barriers (barrier.c): what the library's shutdown does to
 * them.  The entry points are public (rbarrier_* in rmutex.h). */
#ifndef RM_BARRIER_H
#define RM_BARRIER_H

/* rmutex_shutdown, before the watchdog stops (it frees its entries): the
 * participant leases' entries are cancelled and forgotten; each name's
 * next wait makes a new one, its last destroy still leaves. */
void rm_barrier_shutdown(void);

/* fork(): -1 lock the registry, 0 unlock, 1 child: no participant entry. */
void rm_barrier_atfork(int who);

#endif
