/* fair.h -- the fair lock: a FIFO queue in Redis (fair.c, fair.lua). */
#ifndef RM_FAIR_H
#define RM_FAIR_H

#include "handle.h"

extern const struct rm_lock_ops rm_fair_ops;

#endif
