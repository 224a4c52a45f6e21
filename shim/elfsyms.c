/* elfsyms.c -- read an ELF file's .symtab and .dynsym.
 *
 * The dynamic linker only knows .dynsym, which holds what an object
 * exports.  A program's static and file-local globals ("static
 * pthread_mutex_t lock;") are only in .symtab, which the linker keeps
 * unless the file is stripped.  This file maps the file read-only and
 * walks both tables; every offset read from the file is checked against
 * its size first, so a truncated or hostile file gives "not found", never
 * a crash.  Nothing is cached: it runs once per listed symbol at start
 * (the shim), or once per zero-filled mutex on its first use (the header
 * swap names such a mutex by the symbol that contains it). */
#include "elfsyms.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct image {
    const unsigned char *p;
    size_t size;
};

static int in_bounds(const struct image *im, uint64_t off, uint64_t len)
{
    return off <= im->size && len <= im->size - off;
}

static int wanted(const Elf64_Sym *s)
{
    int type = ELF64_ST_TYPE(s->st_info);
    if (s->st_shndx == SHN_UNDEF) return 0;
    return type == STT_OBJECT || type == STT_NOTYPE || type == STT_COMMON;
}

/* Scan one symbol table section. */
static void scan(const struct image *im, const Elf64_Shdr *sh, const Elf64_Shdr *strsh,
                 const char *name, int dynamic, struct rm_elf_sym *first, uint64_t *seen,
                 int *nseen)
{
    if (sh->sh_entsize != sizeof(Elf64_Sym) || !in_bounds(im, sh->sh_offset, sh->sh_size)) return;
    if (!in_bounds(im, strsh->sh_offset, strsh->sh_size)) return;
    const char *strtab = (const char *)im->p + strsh->sh_offset;
    size_t nlen = strlen(name);
    size_t count = sh->sh_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; i++) {
        Elf64_Sym s;
        memcpy(&s, im->p + sh->sh_offset + i * sizeof s, sizeof s);
        if (s.st_name >= strsh->sh_size || strsh->sh_size - s.st_name <= nlen) continue;
        if (memcmp(strtab + s.st_name, name, nlen + 1) || !wanted(&s)) continue;
        int bind = ELF64_ST_BIND(s.st_info);
        int exported = dynamic && (bind == STB_GLOBAL || bind == STB_WEAK) &&
                       ELF64_ST_VISIBILITY(s.st_other) == STV_DEFAULT;
        int known = 0;
        for (int k = 0; k < *nseen && k < 8; k++) known |= seen[k] == s.st_value;
        if (known) {
            if (exported && first->value == s.st_value) first->exported = 1;
            continue;
        }
        if (*nseen == 0) {
            first->value = s.st_value;
            first->size = s.st_size;
            first->exported = exported;
        }
        if (*nseen < 8) seen[*nseen] = s.st_value;
        (*nseen)++;
    }
}

/* Map the file at path and check its ELF header.  0, or RM_ELF_NOFILE. */
static int image_open(const char *path, struct image *im, Elf64_Ehdr *eh)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return RM_ELF_NOFILE;
    struct stat st;
    if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return RM_ELF_NOFILE;
    }
    im->size = (size_t)st.st_size;
    void *map = mmap(NULL, im->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return RM_ELF_NOFILE;
    im->p = map;
    memcpy(eh, im->p, sizeof *eh);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !in_bounds(im, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
        munmap(map, im->size);
        return RM_ELF_NOFILE;
    }
    return 0;
}

/* Section i's header and that of the string table it links to: 0, or -1
 * when it is not a symbol table of type want. */
static int symtab_at(const struct image *im, const Elf64_Ehdr *eh, unsigned i, unsigned want,
                     Elf64_Shdr *sh, Elf64_Shdr *strsh)
{
    memcpy(sh, im->p + eh->e_shoff + i * sizeof *sh, sizeof *sh);
    if (sh->sh_type != want || sh->sh_link >= eh->e_shnum) return -1;
    memcpy(strsh, im->p + eh->e_shoff + sh->sh_link * sizeof *strsh, sizeof *strsh);
    return 0;
}

int rm_elf_lookup(const char *path, const char *name, struct rm_elf_sym *out, int *has_symtab)
{
    *has_symtab = 0;
    struct image im;
    Elf64_Ehdr eh;
    if (image_open(path, &im, &eh)) return RM_ELF_NOFILE;
    int found = 0;
    uint64_t seen[8];
    for (unsigned pass = 0; pass < 2; pass++) {
        /* .symtab first: its entries carry file-local symbols too. */
        unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh, strsh;
            if (symtab_at(&im, &eh, i, want, &sh, &strsh)) continue;
            if (want == SHT_SYMTAB) *has_symtab = 1;
            scan(&im, &sh, &strsh, name, want == SHT_DYNSYM, out, seen, &found);
        }
    }
    munmap((void *)im.p, im.size);
    return found;
}

int rm_elf_symbol_at(const char *path, uintptr_t base, uintptr_t addr, char *name, size_t size,
                     uint64_t *offset)
{
    struct image im;
    Elf64_Ehdr eh;
    if (image_open(path, &im, &eh)) return RM_ELF_NOFILE;
    /* Symbol values are addresses for an executable linked at a fixed
     * address, offsets from the load base for PIE and shared objects. */
    uint64_t value = eh.e_type == ET_DYN ? (uint64_t)(addr - base) : (uint64_t)addr;
    int found = 0;
    for (unsigned pass = 0; pass < 2 && !found; pass++) {
        unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
        for (unsigned i = 0; i < eh.e_shnum && !found; i++) {
            Elf64_Shdr sh, strsh;
            if (symtab_at(&im, &eh, i, want, &sh, &strsh)) continue;
            if (sh.sh_entsize != sizeof(Elf64_Sym) || !in_bounds(&im, sh.sh_offset, sh.sh_size) ||
                !in_bounds(&im, strsh.sh_offset, strsh.sh_size))
                continue;
            size_t count = sh.sh_size / sizeof(Elf64_Sym);
            for (size_t k = 1; k < count; k++) {
                Elf64_Sym sym;
                memcpy(&sym, im.p + sh.sh_offset + k * sizeof sym, sizeof sym);
                if (!wanted(&sym) || value < sym.st_value || value - sym.st_value >= sym.st_size ||
                    sym.st_name >= strsh.sh_size)
                    continue;
                const char *s = (const char *)im.p + strsh.sh_offset + sym.st_name;
                size_t n = strnlen(s, strsh.sh_size - sym.st_name);
                if (!n || n >= size) continue;
                memcpy(name, s, n);
                name[n] = 0;
                *offset = value - sym.st_value;
                found = 1;
                break;
            }
        }
    }
    munmap((void *)im.p, im.size);
    return found;
}
