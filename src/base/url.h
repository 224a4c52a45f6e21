/* url.h -- the pieces of a URL that every scheme shares, and what a URL
 * makes of them: where a Redis server is and how to log in to it. */
#ifndef RM_URL_H
#define RM_URL_H

#include <stddef.h>
#include <sys/socket.h>

/* A URL's TLS (rediss://, tls=1): what its options say, decoded; one per
 * service, on the heap, pointed at by each of its addresses. */
struct rm_tls_conf {
    char *cacert, *capath; /* trust: a PEM file, a hashed directory; both NULL: the system's */
    char *cert, *key;      /* the client's certificate and key (mutual TLS), or NULL */
    char *sni;             /* the name to send and check; NULL: each server's host */
    int insecure;          /* 1: no check of the server's certificate or name */
};

/* A server address parsed from a URL, host name already resolved. */
struct rm_server_addr {
    struct sockaddr_storage sa;
    socklen_t salen;
    const struct rm_tls_conf *tls; /* NULL: plain TCP; else its service's (never owned) */
    char host[256];    /* the host as the URL or the topology named it (TLS checks it) */
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
    struct rm_tls_conf *tls;   /* NULL: plain; else owned, and every address points at it */
    char master[128];          /* sentinel: the master name */
    unsigned long refresh_ms;  /* topology refresh period */
    char display[200];         /* for details and logs: never a password */
};

/* A decimal in [min, max] from s[0..n) into *out: 0, or -1 (not one). */
int rm_url_number(const char *s, size_t n, unsigned long min, unsigned long max,
                  unsigned long *out);

/* s[0..n) percent-decoded into a new string; NULL on a bad escape (*bad
 * set) or ENOMEM. */
char *rm_url_decode(const char *s, size_t n, int *bad);

/* "[user]:password@" or "password@" off the front of s[0..end): *user and
 * *password decoded (allocated; NULL: not given), *rest after the '@' (s
 * when there is none).  Returns 0, EINVAL or ENOMEM with the detail set. */
int rm_url_login(const char *s, const char *end, char **user, char **password, const char **rest);

/* "host:port[,host:port...]" in s[0..end), each resolved into svc->seeds
 * with the login given (copied); scheme starts their display.  Returns 0,
 * EINVAL, EAGAIN or ENOMEM with the detail set. */
int rm_url_hosts(const char *s, const char *end, struct rm_service *svc, const char *scheme,
                 const char *user, const char *password, int db);

/* host (a name, or an address: never a bracket) and port into a->sa. */
int rm_url_resolve(const char *host, unsigned long port, struct rm_server_addr *a);

/* A copy of user and password (each may be NULL), and db, into to.  0 or
 * ENOMEM with the detail set. */
int rm_url_set_login(struct rm_server_addr *to, const char *user, const char *password, int db);

#endif
