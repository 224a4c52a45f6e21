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

/* Parse url (see rmutex_configure) into *out and, when apply is set and the
 * whole URL is good, apply its options to rm_settings.  Returns 0, EINVAL,
 * ENOTSUP, EAGAIN or ENOMEM with the detail set.  On failure *out is
 * untouched and nothing is applied. */
int rm_config_parse(const char *url, struct rm_server_addr *out, int apply);

/* Release what rm_config_parse allocated. */
void rm_config_addr_free(struct rm_server_addr *a);

#endif
