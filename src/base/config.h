/* config.h -- where the Redis server is and how to log in to it. */
#ifndef RM_CONFIG_H
#define RM_CONFIG_H

#include <sys/socket.h>

/* A server address parsed from a URL, host name already resolved. */
struct rm_server_addr {
    struct sockaddr_storage sa;
    socklen_t salen;
    char *user;     /* NULL: none (AUTH password alone, or no AUTH) */
    char *password; /* NULL: no AUTH */
    int db;         /* SELECT, 0: none */
    char display[160]; /* for details and logs: never the password */
};

/* What a URL names: one server, a cluster (its seed nodes), or a primary
 * that Sentinel names (the sentinels). */
enum { RM_MODE_SERVER, RM_MODE_CLUSTER, RM_MODE_SENTINEL };
#define RM_SEEDS_MAX 16

struct rm_service {
    int mode;
    unsigned nseeds;
    struct rm_server_addr *seeds; /* the server / seed nodes / sentinels, each with
                                     its login (on the heap: a caller's stack may
                                     be PTHREAD_STACK_MIN) */
    struct rm_server_addr node_login; /* cluster, sentinel: user, password and db
                                         of the data nodes found (no address) */
    char master[128];          /* sentinel: the master name */
    unsigned long refresh_ms;  /* topology refresh period */
    char display[200];         /* for details and logs: never a password */
};

/* Parse url (see rmutex_configure) into *out and, when apply is set and the
 * whole URL is good, apply its options to rm_settings.  Returns 0, EINVAL,
 * ENOTSUP, EAGAIN or ENOMEM with the detail set.  On failure *out is
 * untouched and nothing is applied. */
int rm_config_parse(const char *url, struct rm_service *out, int apply);

/* A deep copy of from into to (0 or ENOMEM). */
int rm_config_service_copy(const struct rm_service *from, struct rm_service *to);

/* Release what rm_config_parse allocated. */
void rm_config_service_free(struct rm_service *svc);
void rm_config_addr_free(struct rm_server_addr *a);

/* A node's address from a host name or address and a port, with login's
 * user, password and db (copied).  Returns 0, EINVAL/EAGAIN (does not
 * resolve) or ENOMEM with the detail set. */
int rm_config_node_addr(const char *host, unsigned port, const struct rm_server_addr *login,
                        struct rm_server_addr *out);

/* 1 if a and b are the same socket address. */
int rm_config_same_addr(const struct rm_server_addr *a, const struct rm_server_addr *b);

#endif
