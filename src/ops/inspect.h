/* inspect.h -- what the library itself asks of a lock's state
 * (rmutex_inspect and rmutex_list are public: rmutex.h). */
#ifndef RM_INSPECT_H
#define RM_INSPECT_H

#include <stddef.h>
#include <stdint.h>

struct rm_endpoint;
struct rm_node;
struct redisReply;

/* The thread that holds name ("<uuid>:<tid>": a fair waiter's or a
 * writer's suffix dropped), read on ep, into buf.  0; ENOENT when it is
 * free, read, or held by a process's cache (no one thread); else as
 * rmutex_inspect. */
int rm_inspect_holder(struct rm_endpoint *ep, const char *name, char *buf, size_t size);

/* What the holder registry says of owner's process ("<uuid>:<thread>"),
 * into *f, with the age of its hold of lock from server_time_ms; nothing
 * when it does not announce or the call fails (the caller read the
 * primitive's own state already). */
struct rm_registry_fields;
void rm_inspect_process(struct rm_endpoint *ep, const char *lock, const char *owner,
                        int64_t server_time_ms, const struct rm_registry_fields *f,
                        int64_t deadline);

/* owner as a thread's owner id: up to a '|' (a fair waiter's acquisition),
 * without a ":write" (a read-write lock's writer), into buf.  Returns its
 * length; 0 when it is none (empty, too long, a process's cache ":0"). */
size_t rm_inspect_thread_of(const char *owner, char *buf, size_t size);

/* A plain command (argc words, at most 16) on node n, through its pool:
 * 0 and *out (freeReplyObject), or an error (an error reply's errno). */
int rm_inspect_node_call(struct rm_node *n, int argc, const char **argv, struct redisReply **out);

/* One SCAN page on n from *cursor (updated; "0" at the end): the hash
 * keys matching pattern into *out (an array reply {cursor, keys}, freed by
 * the caller). */
int rm_inspect_scan_page(struct rm_node *n, char *cursor, size_t cursor_size, const char *pattern,
                         struct redisReply **out);

/* fn(ep, primary, arg) for every primary of the session's endpoint in
 * turn (the session entered around it), until one returns nonzero:
 * returned (a negative value as ETIMEDOUT). */
int rm_inspect_each_primary(int (*fn)(struct rm_endpoint *ep, struct rm_node *n, void *arg),
                            void *arg);

/* A public walk's entry point (rmutex_list, rmutex_waits): EINVAL when
 * its callback is missing (has_callback 0), else rm_inspect_each_primary
 * inside the entry points' frame (errno kept, the detail set). */
int rm_inspect_walk(int has_callback, int (*fn)(struct rm_endpoint *ep, struct rm_node *n, void *arg),
                    void *arg);

#endif
