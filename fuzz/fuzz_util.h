/* fuzz_util.h -- what the fuzz targets share. */
#ifndef RMUTEX_FUZZ_UTIL_H
#define RMUTEX_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The input as a C string (cut at its first NUL by whoever reads it), or
 * NULL when out of memory.  free() it. */
static inline char *fuzz_cstring(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return NULL;
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* 0 if the input announces an array or string longer than a million
 * (a '*' or '$' and then such a number): hiredis 0.14 allocates what a
 * header announces before the data arrives (it has no maxelements, which
 * came with 1.0), so a server can make its client allocate gigabytes --
 * hiredis's limit, not the code under test, and such inputs are skipped. */
static inline int fuzz_sane_lengths(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i + 1 < size; i++) {
        if (data[i] != '*' && data[i] != '$') continue;
        unsigned long long v = 0;
        size_t j = i + 1;
        while (j < size && data[j] >= '0' && data[j] <= '9' && v <= 1000000) v = v * 10 + (data[j++] - '0');
        if (v > 1000000) return 0;
    }
    return 1;
}

#endif
