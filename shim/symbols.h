/* symbols.h -- find a listed mutex's address from its symbol name. */
#ifndef RM_SHIM_SYMBOLS_H
#define RM_SHIM_SYMBOLS_H

#include <stddef.h>

#include "config.h"

/* Resolve e to the address of the mutex in this process.  Returns 0 with
 * *addr, or -1 with a one-line reason in why. */
int rm_shim_resolve(const struct rm_shim_entry *e, void **addr, char *why, size_t whylen);

#endif
