/* nonfair.h -- the non-fair lock: Redisson's RLock protocol (nonfair.c). */
#ifndef RM_NONFAIR_H
#define RM_NONFAIR_H

#include "handle.h"

extern const struct rm_lock_ops rm_nonfair_ops;

#endif
