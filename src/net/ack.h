/* ack.h -- replica acknowledgement (WAIT) of a write. */
#ifndef RM_ACK_H
#define RM_ACK_H

struct rm_conn;
struct rm_service;

/* Replica acknowledgement (WAIT) of a write, as the settings ask
 * (replicas=, min_replicas=): WAIT for wait_for replicas, and a write is
 * good when need of them acknowledged. */
struct rm_ack {
    unsigned wait_for, need;
    long long acked;
    char refused[96]; /* the server's error when it refused WAIT (no WAIT there); "" */
};

/* What the settings want of a primary with `known` replicas (the
 * topology's count; 0 when unknown). */
struct rm_ack rm_ack_want(unsigned known);

/* Queue "WAIT wait_for timeout" on c; read its reply into a->acked:
 * 1 enough, 0 too few, RM_E_LOST (the reply is still pending: c is not
 * reusable). */
void rm_ack_append(struct rm_conn *c, const struct rm_ack *a);
int rm_ack_read(struct rm_conn *c, struct rm_ack *a);

/* 1 if fewer replicas acknowledged than a needs. */
static inline int rm_ack_short(const struct rm_ack *a) { return a->acked < (long long)a->need; }

/* Set the detail of a refused acquisition of lock: too few acknowledged
 * it, and given_back says what became of it (0: given back; RM_DEFERRED:
 * handed to the watchdog; else the give-back failed). */
void rm_ack_shortfall_detail(const struct rm_ack *a, const char *lock, int given_back);

/* rmutex_configure's look at svc when the settings ask for replica
 * acknowledgement (ack.c): RMUTEX_ENOREPLICAS with the detail set when
 * the server refuses WAIT; 0 otherwise, and when no server answered. */
int rm_ack_probe(const struct rm_service *svc);

#endif
