/* elfsyms.c -- read an ELF file's .symtab and .dynsym.
 *
 * The dynamic linker only knows .dynsym, which holds what an object
 * exports.  A program's static and file-local globals ("static
 * pthread_mutex_t lock;") are only in .symtab, which the linker keeps
 * unless the file is stripped.  This file maps the file read-only and
 * walks both tables; every offset read from the file is checked against
 * its size first, so a truncated or hostile file gives "not found", never
 * a crash.  Nothing is cached: it runs once per listed symbol at start. */
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

int rm_elf_lookup(const char *path, const char *name, struct rm_elf_sym *out, int *has_symtab)
{
    *has_symtab = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return RM_ELF_NOFILE;
    struct stat st;
    if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return RM_ELF_NOFILE;
    }
    struct image im = { NULL, (size_t)st.st_size };
    void *map = mmap(NULL, im.size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return RM_ELF_NOFILE;
    im.p = map;

    int found = RM_ELF_NOFILE;
    Elf64_Ehdr eh;
    memcpy(&eh, im.p, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_bounds(&im, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        goto out;
    found = 0;
    uint64_t seen[8];
    for (unsigned pass = 0; pass < 2; pass++) {
        /* .symtab first: its entries carry file-local symbols too. */
        unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh, strsh;
            memcpy(&sh, im.p + eh.e_shoff + i * sizeof sh, sizeof sh);
            if (sh.sh_type != want || sh.sh_link >= eh.e_shnum) continue;
            if (want == SHT_SYMTAB) *has_symtab = 1;
            memcpy(&strsh, im.p + eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh);
            scan(&im, &sh, &strsh, name, want == SHT_DYNSYM, out, seen, &found);
        }
    }
out:
    munmap(map, im.size);
    return found;
}
