/* config.h -- a URL into the deployment it names, and the addresses in it
 * (the types: url.h). */
#ifndef RM_CONFIG_H
#define RM_CONFIG_H

#include "url.h"

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
