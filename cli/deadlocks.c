/* deadlocks.c -- rmutex deadlocks [--json]: cycles of waits across
 * processes, found from the holder registry.
 *
 * DESIGN
 * ------
 * The wait-for graph: every announced wait (rmutex_waits: every process's
 * registry entry, on every primary) is an edge from the waiting thread to
 * the thread that holds what it waits for (rmutex_inspect of the name: its
 * owner id, a fair waiter's or a writer's suffix dropped).  A thread waits
 * for one thing at a time, so each node has one edge out at most, and
 * every cycle is found by walking from each node until the walk meets a
 * node seen before (colouring: O(waits)).  No edge for what no one thread
 * holds: a free lock, a read hold (readers are processes), a process's
 * cached hold, a condition variable (nobody holds it).  A thread that
 * "waits" for a lock it holds is an entry not rewritten yet (it got the
 * lock within the last ~50 ms): no edge.
 *
 * The entries of different processes are read at different moments, so
 * a cycle found once is looked for again 300 ms later (more than a wait's
 * way out of the registry takes) and reported only if every member still
 * waits for the same lock, since before the first look: a cycle of waits
 * that both existed at once and still do.
 *
 * Output: per cycle, its members in order, each with its thread, process
 * (host, pid, program), the lock it holds (the one its predecessor waits
 * for) and the one it waits for, and for how long; --json, one object per
 * cycle per line.  Exit 0: none; 1: at least one; else as status. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One snapshot of the graph: waits and, for each, its edge (the index of
 * the waiting node the holder is, or -1). */
struct graph {
    struct waits ws;
    long *next;
};

/* owner (a lock's holder) as a thread id: up to '|', without ":write";
 * 0 when it is no one thread (a cache's ":0"). */
static int thread_of(const char *owner, char *buf, size_t size)
{
    size_t n = strcspn(owner, "|");
    if (n > 6 && !strncmp(owner + n - 6, ":write", 6)) n -= 6;
    if (!n || n >= size || (n > 2 && !strncmp(owner + n - 2, ":0", 2))) return 0;
    memcpy(buf, owner, n);
    buf[n] = 0;
    return 1;
}

static int graph_read(struct graph *gr)
{
    int r = waits_collect(NULL, &gr->ws);
    if (r) return r;
    gr->next = malloc((gr->ws.n ? gr->ws.n : 1) * sizeof *gr->next);
    if (!gr->next) {
        waits_free(&gr->ws);
        return ENOMEM;
    }
    rmutex_lockinfo_t in;
    for (size_t i = 0; i < gr->ws.n; i++) {
        const rmutex_waitinfo_t *w = &gr->ws.w[i];
        char holder[64];
        gr->next[i] = -1;
        if (w->kind == RMUTEX_WAIT_COND || w->kind == RMUTEX_WAIT_SEM ||
            w->kind == RMUTEX_WAIT_BARRIER || w->kind == RMUTEX_WAIT_ONCE)
            continue; /* nobody holds it: no edge */
        r = rmutex_inspect(w->name, &in, sizeof in);
        if (r == EINVAL) continue; /* not a lock (any more) */
        if (r) break;
        if (!in.held || in.mode == RMUTEX_RW_READ || !thread_of(in.owner, holder, sizeof holder) ||
            !strcmp(holder, w->owner))
            continue;
        for (size_t j = 0; j < gr->ws.n; j++)
            if (!strcmp(gr->ws.w[j].owner, holder)) gr->next[i] = (long)j;
    }
    if (r) {
        free(gr->next);
        waits_free(&gr->ws);
    }
    return r;
}

static void graph_free(struct graph *gr)
{
    free(gr->next);
    waits_free(&gr->ws);
}

/* Each cycle's members (indexes into g), starts[c]..starts[c+1]. */
struct cycles {
    size_t *member, *start, n;
};

static int find_cycles(const struct graph *gr, struct cycles *c)
{
    size_t n = gr->ws.n;
    unsigned char *colour = calloc(n ? n : 1, 1); /* 0 new, 1 on this walk, 2 done */
    c->member = malloc((n ? n : 1) * sizeof *c->member);
    c->start = malloc((n + 1) * sizeof *c->start);
    c->n = 0;
    if (!colour || !c->member || !c->start) {
        free(colour);
        return ENOMEM;
    }
    size_t used = 0;
    c->start[0] = 0;
    for (size_t i = 0; i < n; i++) {
        long v = (long)i;
        while (v >= 0 && !colour[v]) colour[v] = 1, v = gr->next[v];
        if (v >= 0 && colour[v] == 1) { /* a cycle through v, new on this walk */
            long u = v;
            do c->member[used++] = (size_t)u, u = gr->next[u];
            while (u != v);
            c->start[++c->n] = used;
        }
        for (v = (long)i; v >= 0 && colour[v] == 1; v = gr->next[v]) colour[v] = 2;
    }
    free(colour);
    return 0;
}

/* Whether member w of the first look still waits (same thread, lock,
 * since) in the second, g2: its index there or -1. */
static long still_waits(const rmutex_waitinfo_t *w, const struct graph *g2, int64_t elapsed_ms)
{
    for (size_t j = 0; j < g2->ws.n; j++) {
        const rmutex_waitinfo_t *x = &g2->ws.w[j];
        if (!strcmp(x->owner, w->owner) && !strcmp(x->name, w->name) &&
            x->waited_ms + 100 >= w->waited_ms + elapsed_ms)
            return (long)j;
    }
    return -1;
}

/* Whether cycle k of the first look is a cycle of g2 too. */
static int confirmed(const struct graph *g1, const struct cycles *c, size_t k,
                     const struct graph *g2, int64_t elapsed_ms)
{
    for (size_t m = c->start[k]; m < c->start[k + 1]; m++) {
        size_t nx = m + 1 < c->start[k + 1] ? m + 1 : c->start[k];
        long a = still_waits(&g1->ws.w[c->member[m]], g2, elapsed_ms);
        long b = still_waits(&g1->ws.w[c->member[nx]], g2, elapsed_ms);
        if (a < 0 || b < 0 || g2->next[a] != b) return 0;
    }
    return 1;
}

static void print_cycle(const struct graph *gr, const struct cycles *c, size_t k, int json)
{
    size_t first = c->start[k], end = c->start[k + 1], n = end - first;
    if (json) printf("{\"threads\":%zu,\"cycle\":[", n);
    else printf("deadlock: %zu threads wait for each other\n", n);
    for (size_t m = first; m < end; m++) {
        const rmutex_waitinfo_t *w = &gr->ws.w[c->member[m]];
        const rmutex_waitinfo_t *prev = &gr->ws.w[c->member[m > first ? m - 1 : end - 1]];
        if (json) {
            printf("%s{", m > first ? "," : "");
            json_wait(w);
            printf(",\"holds\":");
            json_str(prev->name);
            printf(",\"waits_for\":");
            json_str(w->name);
            printf("}");
            continue;
        }
        char who[400], t[32];
        struct holder h = waiter_process(w);
        holder_name(&h, who, sizeof who);
        span(w->waited_ms, t, sizeof t);
        printf("  %s  %s\n    holds %s, waits for %s (%s, %s)\n", w->owner, who, prev->name,
               w->name, wait_kind_name(w->kind), t);
    }
    if (json) printf("]}\n");
}

static void deadlocks_usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] deadlocks [--json]\n"
          "Find cycles of waits across processes: a thread that waits for a lock held by a\n"
          "thread that waits for ... a lock the first one holds.  Reads every process's\n"
          "announced waits (waits longer than announce_wait, 100 ms) on every primary, and\n"
          "confirms a cycle 300 ms later before reporting it.\n"
          "      --json   one JSON object per cycle, one per line\n"
          "Exit: 0 none; 1 a deadlock was found; 64 usage; 69 Redis unreachable; 76 a Redis\n"
          "error; 77 login or ACL refused.\n",
          f);
}

int cmd_deadlocks(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            deadlocks_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            err("deadlocks: unknown argument %s", argv[i]);
            return EXIT_USAGE;
        }
    }
    int r = configure();
    if (r) return r;
    struct graph g1, g2;
    struct cycles c1;
    if ((r = graph_read(&g1))) return redis_failed("deadlocks", NULL, r);
    if ((r = find_cycles(&g1, &c1))) {
        graph_free(&g1);
        return redis_failed("deadlocks", NULL, r);
    }
    size_t found = 0;
    if (c1.n) {
        int64_t t0 = mono_ns();
        struct timespec pause = { 0, 300000000 };
        nanosleep(&pause, NULL);
        if (!(r = graph_read(&g2))) {
            int64_t elapsed = (mono_ns() - t0) / 1000000;
            for (size_t k = 0; k < c1.n; k++)
                if (confirmed(&g1, &c1, k, &g2, elapsed)) {
                    print_cycle(&g1, &c1, k, json);
                    found++;
                }
            graph_free(&g2);
        }
    }
    free(c1.member);
    free(c1.start);
    graph_free(&g1);
    if (r) return redis_failed("deadlocks", NULL, r);
    if (!found && !json) say("no deadlock found");
    return found ? 1 : 0;
}
