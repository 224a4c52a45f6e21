/* waits.h -- every process's holder-registry entry, read (rmutex_waits is
 * public: rmutex.h). */
#ifndef RM_WAITS_H
#define RM_WAITS_H

#include <stddef.h>

struct redisReply;

/* fn(key, entry, server_ms, arg) for every process's registry entry on
 * every primary: its key, its HGETALL reply (an array of field, value),
 * the time (ms) of the node that holds it, read once per SCAN page.  A
 * nonzero return stops the walk and is returned.  Returns as
 * rm_inspect_walk (EINVAL when has_callback is 0). */
typedef int (*rm_waits_entry_fn)(const char *key, const struct redisReply *entry,
                                 long long server_ms, void *arg);
int rm_waits_each_entry(int has_callback, rm_waits_entry_fn fn, void *arg);

/* Where rm_waits_describe puts an entry's process (pid, host, exe, cmd,
 * lib); RM_WAITS_PROCESS(p) makes it for any struct with those members. */
struct rm_waits_process {
    long *pid;
    char *host, *exe, *cmd, *lib;
    size_t host_size, exe_size, cmd_size, lib_size;
};
#define RM_WAITS_PROCESS(p)                                                               \
    { &(p)->pid, (p)->host, (p)->exe, (p)->cmd, (p)->lib, sizeof (p)->host, sizeof (p)->exe, \
      sizeof (p)->cmd, sizeof (p)->lib }
void rm_waits_describe(const struct redisReply *entry, const struct rm_waits_process *p);

#endif
