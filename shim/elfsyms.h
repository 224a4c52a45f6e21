/* elfsyms.h -- look a data symbol up in an ELF file's symbol tables. */
#ifndef RM_SHIM_ELFSYMS_H
#define RM_SHIM_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>

struct rm_elf_sym {
    uint64_t value;    /* st_value: add the object's load bias */
    uint64_t size;     /* st_size */
    int exported;      /* defined in .dynsym, global or weak, default visibility */
};

enum {
    RM_ELF_NOFILE = -1,  /* the file cannot be opened or is not a 64-bit ELF file */
};

/* Look name up among the defined data symbols (not functions, not TLS) of
 * the file at path: .symtab when there is one, and .dynsym.  Returns the
 * number of distinct addresses found (0, 1, or more: ambiguous, e.g. two
 * file-local statics of the same name) with the first in *out, or
 * RM_ELF_NOFILE.  *has_symtab says whether the file has a .symtab (it
 * has none when stripped). */
int rm_elf_lookup(const char *path, const char *name, struct rm_elf_sym *out, int *has_symtab);

/* The data symbol of the file at path that contains the address addr of a
 * process that loaded the file at base (dladdr's dli_fbase): its name into
 * name (cut to size) and addr's offset in it into *offset.  Returns 1 when
 * found, 0 when no symbol contains it (heap or stack memory, a stripped
 * file), or RM_ELF_NOFILE. */
int rm_elf_symbol_at(const char *path, uintptr_t base, uintptr_t addr, char *name, size_t size,
                     uint64_t *offset);

#endif
