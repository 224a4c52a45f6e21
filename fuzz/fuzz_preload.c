/* fuzz_preload.c -- rm_shim_config_parse(), the RMUTEX_PRELOAD parser of
 * the preload shim, on any bytes, for a program named "prog".  Every input
 * must give entries and reported errors, never a crash or a leak. */
#include "../shim/config.h" /* the shim's, not src/base/config.h */

#include "fuzz_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void count(void *arg, const char *msg)
{
    if (!msg) abort();
    ++*(int *)arg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec = fuzz_cstring(data, size);
    if (!spec) return 0;
    struct rm_shim_config c;
    int errors = 0;
    int r = rm_shim_config_parse(spec, "/usr/bin/prog", "prog", &c, count, &errors);
    if (r >= 0) {
        if (r != errors) abort();
        rm_shim_config_free(&c);
    }
    free(spec);
    return 0;
}
