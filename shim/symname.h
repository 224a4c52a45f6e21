/* symname.h -- a lock name for a zero-filled mutex: the symbol it is in. */
#ifndef RM_SHIM_SYMNAME_H
#define RM_SHIM_SYMNAME_H

/* "<file>:<symbol>" or "<file>:<symbol>+<offset>" for the data symbol of a
 * loaded ELF object that contains addr (<file>: the object's base name),
 * malloc'd; NULL when none does (heap or stack memory, a stripped file). */
char *rm_symbol_name_of(const void *addr);

#endif
