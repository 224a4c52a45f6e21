/* proc.h -- running a helper program and reading what it prints. */
#ifndef BENCH_PROC_H
#define BENCH_PROC_H

#include <stddef.h>

/* Run argv[0] (looked up in PATH) with argv, its environment being ours
 * plus env_add ("NAME=value" strings, NULL-terminated, replacing ours of
 * the same name; NULL for none) minus the names in env_del.  Its stdout
 * goes to buf (NUL-terminated, cut at size), its stderr to ours.  Returns
 * its exit status, or -1 if it could not be run or was killed. */
int run_capture(const char *const *argv, const char *const *env_add, const char *const *env_del,
                char *buf, size_t size);

#endif
