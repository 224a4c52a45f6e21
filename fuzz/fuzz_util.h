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

#endif
