/* bigstack.h -- run a function where it has stack enough (bigstack.c). */
#ifndef RM_BIGSTACK_H
#define RM_BIGSTACK_H

/* fn(arg) on the calling thread: on its own stack if it has room, else on
 * a stack from the heap.  Returns 0 once fn returned (errno as fn left
 * it); ENOMEM without calling fn when no stack could be had. */
int rm_bigstack_run(void (*fn)(void *), void *arg);

#endif
