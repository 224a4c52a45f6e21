/* fuzz_reply.c -- any bytes a server (or a man in the middle) sends on a
 * command connection.  A real struct rm_conn reads them from a socketpair
 * whose other end has written the input and closed, through hiredis's
 * parser, while rm_script_call() makes each script's call (EVALSHA, the
 * EVAL fallback on NOSCRIPT, the error classification, the naming of a
 * call an ACL refused from "@user_script:N" in the error text).  Every
 * input must end in a reply or a clear status -- never a crash, a hang
 * (the read ends at EOF) or a leak. */
#include "conn.h"
#include "internal.h"
#include "script.h"

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "fuzz_util.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_sane_lengths(data, size)) return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return 0;
    /* The "server" says everything at once, then hangs up. */
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(sv[1], data + off, size - off);
        if (n <= 0) break;
        off += (size_t)n;
    }
    shutdown(sv[1], SHUT_WR);
    struct rm_conn *c = calloc(1, sizeof *c);
    c->fd = sv[0];
    c->reader = redisReaderCreate();
    c->rbuf = malloc(RM_CONN_RBUF);
    const char *argv[] = { "k1", "k2", "k3", "k4", "a", "b", "c", "d", "e", "f" };
    size_t lens[] = { 2, 2, 2, 2, 1, 1, 1, 1, 1, 1 };
    rm_nsec deadline = rm_clock_after(RM_MSEC(1000));
    for (int id = 0; id < RM_SCRIPT_COUNT; id++) {
        redisReply *reply = NULL;
        int r = rm_script_call(c, id, 4, 10, argv, lens, id & 1, deadline, &reply);
        if (r == RM_E_REDIRECT) {
            if (!reply) abort();
            freeReplyObject(reply);
        } else if (r == 0) {
            if (!reply) abort();
            rm_conn_reply_status(reply);
            freeReplyObject(reply);
        } else if (r == RM_E_LOST || r == RM_E_UNSENT) {
            break; /* the stream is spent: a real caller drops the connection */
        }
    }
    close(sv[1]);
    rm_conn_close(c);
    return 0;
}
