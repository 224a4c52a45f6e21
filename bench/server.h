/* server.h -- the Redis server the benchmark talks to: its own throw-away
 * redis-server, or one given by URL (loopback or unix socket only). */
#ifndef BENCH_SERVER_H
#define BENCH_SERVER_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <sys/types.h>

struct server {
    char host[256];    /* "" for a unix socket */
    int port;
    char sock[256];    /* unix socket path, or "" */
    char user[128], pass[256];
    int db;
    char base[1024];   /* the URL without its query */
    char query[512];   /* the given URL's options, without '?' */
    int tls_port;      /* our redis-server's TLS port (W14), or 0 */
    char ca[300];      /* the CA that signed its certificate (made for the run) */
    pid_t pid;         /* our redis-server, or 0 */
    pid_t owner;       /* the process that started it */
    char dir[256];     /* its temp dir */
};

extern struct server srv;

/* Start redis-server on a free loopback port in a temp dir.  0 or -1. */
int server_start(const char *binary);
/* Use the server of url instead.  0 or -1 (malformed, not loopback). */
int server_use_url(const char *url);
/* Stop our redis-server (only in the process that started it). */
void server_stop(void);

/* The URL rmutex_configure() gets: the server plus opts ("a=1&b=2" or ""). */
void server_url(const char *opts, char *out, size_t n);

/* A new connection (authenticated, db selected), or NULL. */
redisContext *server_connect(void);

/* A command's reply, or NULL (error printed) for a failed command or an
 * error reply. */
redisReply *rcmd(redisContext *c, const char *fmt, ...);
redisReply *rcmd_argv(redisContext *c, int argc, const char **argv, const size_t *lens);
/* An integer reply's value, or -1 with an error printed. */
long long rcmd_int(redisContext *c, const char *fmt, ...);
/* "field:value" of an INFO section, as a double (NAN if absent). */
double info_field(redisContext *c, const char *section, const char *field);

/* The command-line arguments that point redis-benchmark at the server. */
int server_benchmark_args(const char **argv, int max);

#endif
