/* symname.c -- name a zero-filled mutex by the symbol that contains it.
 *
 * "static pthread_mutex_t m;" is all zeros, which is glibc's
 * PTHREAD_MUTEX_INITIALIZER; programs rely on it.  Under the header swap
 * such a mutex has no name from its initializer, so it is named, on first
 * use, after where it lives: dladdr() says which loaded object contains the
 * address and where that object is loaded; the object's own symbol tables
 * (.symtab, which has file-local statics too, then .dynsym; elfsyms.c) say
 * which data symbol contains it.  The name -- "<object base name>:<symbol>",
 * with "+<offset>" inside an array or struct -- is the same in every process
 * running the same build, as a lock name must be.  Memory no symbol covers
 * (the heap, a stack, a stripped binary) gets no name: the caller falls
 * back to a process-local mutex. */
#include "symname.h"
#include "elfsyms.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *rm_symbol_name_of(const void *addr)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fbase) return NULL;
    /* The main program's map has no path of its own here. */
    char exe[PATH_MAX];
    const char *path = info.dli_fname;
    if (!path || path[0] != '/') {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return NULL;
        exe[n] = 0;
        path = exe;
    }
    char sym[256];
    uint64_t off = 0;
    if (rm_elf_symbol_at(path, (uintptr_t)info.dli_fbase, (uintptr_t)addr, sym, sizeof sym,
                         &off) != 1)
        return NULL;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t size = strlen(base) + strlen(sym) + 32;
    char *name = malloc(size);
    if (!name) return NULL;
    if (off) snprintf(name, size, "%s:%s+%llu", base, sym, (unsigned long long)off);
    else snprintf(name, size, "%s:%s", base, sym);
    return name;
}
