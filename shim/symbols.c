/* symbols.c -- from a listed symbol to the address of the mutex.
 *
 * A plain "symbol" is looked for, in order:
 *
 *   1. dlsym(RTLD_DEFAULT): every object's dynamic symbol table, in the
 *      order the dynamic linker searches them.  This is the address the
 *      program really uses, also when a library's global was copied into a
 *      non-PIE executable (a COPY relocation: the library's own .symtab
 *      address is then a dead original).  Executables only export their
 *      globals with -rdynamic (or --export-dynamic-symbol).
 *   2. The executable's .symtab (/proc/self/exe plus its load bias), which
 *      unstripped programs keep: static and file-local globals too.  Two
 *      file-local symbols of the same name are ambiguous and refused.
 *
 * "object:symbol" looks only at the shared object whose file name is
 * object (or starts with "object."), or the executable when object is its
 * name: its .symtab and .dynsym.  An exported (default visibility) global
 * found there is still taken from dlsym(RTLD_DEFAULT) when that finds it,
 * for the COPY relocation reason above.
 *
 * Objects are those loaded at start: a library dlopen()ed later is not
 * there yet when this runs, and is reported as not loaded. */
#include "symbols.h"
#include "elfsyms.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct find {
    const char *object;  /* wanted base name; NULL: the executable */
    char path[4096];
    uintptr_t bias;
    int found;
};

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int exe_path(char *buf, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) return -1;
    buf[len] = 0;
    return 0;
}

static int object_matches(const char *want, const char *file)
{
    const char *b = base_name(file);
    size_t n = strlen(want);
    return !strncmp(b, want, n) && (b[n] == 0 || b[n] == '.');
}

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct find *f = arg;
    const char *name = info->dlpi_name;
    int main_program = !name || !*name;
    if (main_program) {
        /* The first object is the executable, with an empty name. */
        char exe[4096];
        if (exe_path(exe, sizeof exe)) return 0;
        if (f->object && !object_matches(f->object, exe)) return 0;
        snprintf(f->path, sizeof f->path, "%s", exe);
    } else {
        if (!f->object || !object_matches(f->object, name)) return 0;
        snprintf(f->path, sizeof f->path, "%s", name);
    }
    f->bias = (uintptr_t)info->dlpi_addr;
    f->found = 1;
    return 1;
}

/* The smallest object e may be: a pthread_once_t (";once") is 4 bytes,
 * every other listed kind at least a pthread_mutex_t's. */
static size_t least_size(const struct rm_shim_entry *e, const char **type)
{
    *type = e->once ? "pthread_once_t" : "pthread_mutex_t";
    return e->once ? sizeof(pthread_once_t) : sizeof(pthread_mutex_t);
}

/* What dlsym(RTLD_DEFAULT) knows about sym: 1 with *addr, 0 not found, -1
 * found but unusable (why filled). */
static int from_dynamic(const struct rm_shim_entry *e, const char *sym, void **addr, char *why,
                        size_t whylen)
{
    const char *kind;
    size_t least = least_size(e, &kind);
    void *p = dlsym(RTLD_DEFAULT, sym);
    if (!p) return 0;
    Dl_info info;
    const ElfW(Sym) *s = NULL;
    if (dladdr1(p, &info, (void **)&s, RTLD_DL_SYMENT) && s) {
        int type = ELF64_ST_TYPE(s->st_info);
        if (type == STT_FUNC || type == STT_GNU_IFUNC) {
            snprintf(why, whylen, "'%s' is a function, not a pthread_mutex_t", sym);
            return -1;
        }
        if (type == STT_TLS) {
            snprintf(why, whylen, "'%s' is thread-local; only process-wide mutexes can be listed", sym);
            return -1;
        }
        if (s->st_size && s->st_size < least) {
            snprintf(why, whylen, "'%s' is %zu bytes, smaller than a %s (%zu)", sym,
                     (size_t)s->st_size, kind, least);
            return -1;
        }
    }
    *addr = p;
    return 1;
}

int rm_shim_resolve(const struct rm_shim_entry *e, void **addr, char *why, size_t whylen)
{
    int r;
    if (!e->object && (r = from_dynamic(e, e->symbol, addr, why, whylen))) return r > 0 ? 0 : -1;

    struct find f;
    memset(&f, 0, sizeof f);
    f.object = e->object;
    dl_iterate_phdr(find_object, &f);
    if (!f.found) {
        if (e->object)
            snprintf(why, whylen, "'%s:%s' not found: no object called %s is loaded", e->object,
                     e->symbol, e->object);
        else
            snprintf(why, whylen, "'%s' not found: cannot read the executable", e->symbol);
        return -1;
    }
    struct rm_elf_sym s;
    int has_symtab = 0;
    int n = rm_elf_lookup(f.path, e->symbol, &s, &has_symtab);
    const char *what = e->object ? e->object : "the executable";
    if (n == RM_ELF_NOFILE) {
        snprintf(why, whylen, "'%s' not found: cannot read %s (%s)", e->symbol, what, f.path);
        return -1;
    }
    if (n == 0) {
        snprintf(why, whylen, "'%s' not found in %s%s", e->symbol,
                 e->object ? e->object : "any dynamic symbol table or the executable's .symtab",
                 has_symtab ? "" : " (it is stripped: it has no .symtab)");
        return -1;
    }
    if (n > 1) {
        snprintf(why, whylen, "'%s' is ambiguous: %d different symbols of that name in %s", e->symbol,
                 n, what);
        return -1;
    }
    const char *type;
    size_t least = least_size(e, &type);
    if (s.size && s.size < least) {
        snprintf(why, whylen, "'%s' is %zu bytes, smaller than a %s (%zu)", e->symbol,
                 (size_t)s.size, type, least);
        return -1;
    }
    if (s.exported && (r = from_dynamic(e, e->symbol, addr, why, whylen)) > 0) return 0;
    *addr = (void *)(f.bias + (uintptr_t)s.value);
    return 0;
}
