/* status.c -- rmutex status [--json] NAME..., rmutex wait [-w DUR]
 * [--held] NAME and rmutex list [--json] [PATTERN]: look at locks without
 * taking them.
 *
 * Both read through rmutex_inspect() (inspect.lua on the primary that
 * serves the name: read only, no fencing token spent).  status prints, per
 * name, free or held, the holder, the lease left, the fencing counter, the
 * robust marks, the fair queue and the subscribers, and who the holder is
 * and how long it has held when its process announces itself (the holder
 * registry); --json one object per line with stable field names.  Exit 0
 * when every name is held, 3 when one is free, 4 when one could not be
 * read (LSB status codes; unreachable, refused, or a name taken by other
 * data: the reason is said, common.c's redis_failed).
 *
 * wait polls every 50 ms (bounded work: one script call) until the lock is
 * seen free, or held with --held; exit 0, the -E code (1) at the -w
 * deadline, 69 when Redis cannot be reached then.  Without -w it waits on
 * through an outage, which it tells as it happens (as run does).
 *
 * list walks every primary's keyspace with SCAN (rmutex_list: O(keys),
 * never KEYS) and prints the held locks whose names match PATTERN, one
 * line each, or status's JSON objects.  Free locks have no keys: not
 * listed.
 *
 * A read-write lock (rmutex_inspect's kind) prints as one: its mode, its
 * writer or its readers (each with its process: struct holder, the same
 * lines as a mutex's holder, indented), its queue's kinds; its JSON is the
 * mutex's fields, then its own.  A mutex's lines and JSON are as they
 * were before read-write locks.
 *
 * Waiters: status and list also read the announced waits (rmutex_waits:
 * a SCAN of every primary for the processes' registry entries, once per
 * command for list, once per name for status).  status lists a lock's
 * waiters -- in its fair queue's order for those at its head, then by how
 * long they have waited -- each with its thread, process and wait; its
 * JSON gains "waiters".  list adds "N waiting".  Only waits longer than
 * the announce delay (100 ms) of processes that announce are there. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The waiters of one lock, in order: those in its fair queue's head (a
 * fair mutex's, a read-write lock's) in its order, then the others by how
 * long they have waited, longest first. */
struct ordered {
    const rmutex_waitinfo_t **w;
    size_t n;
};

struct ranked {
    const rmutex_waitinfo_t *w;
    unsigned rank;
};

static unsigned queue_rank(const rmutex_lockinfo_t *in, const char *owner)
{
    size_t n = strlen(owner);
    for (unsigned i = 0; i < in->queue_shown; i++)
        if (!strncmp(in->queue[i], owner, n) && (in->queue[i][n] == '|' || !in->queue[i][n]))
            return i;
    return RMUTEX_INSPECT_QUEUE;
}

static int by_rank(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->w->waited_ms > y->w->waited_ms ? -1 : x->w->waited_ms < y->w->waited_ms;
}

/* ws's waits for name, ordered for in (o->w malloc'ed; n 0 on failure). */
static void order_waiters(const char *name, const rmutex_lockinfo_t *in, const struct waits *ws,
                          struct ordered *o)
{
    o->n = 0;
    o->w = NULL;
    struct ranked *r = ws && ws->n ? malloc(ws->n * sizeof *r) : NULL;
    if (!r) return;
    size_t n = 0;
    for (size_t i = 0; i < ws->n; i++)
        if (!strcmp(ws->w[i].name, name)) r[n].w = &ws->w[i], r[n].rank = queue_rank(in, ws->w[i].owner), n++;
    qsort(r, n, sizeof *r, by_rank);
    if (n && (o->w = malloc(n * sizeof *o->w))) {
        for (size_t i = 0; i < n; i++) o->w[i] = r[i].w;
        o->n = n;
    }
    free(r);
}

static void json_waiters(const struct ordered *o)
{
    printf(",\"waiters\":[");
    for (size_t i = 0; i < o->n; i++) {
        printf("%s{", i ? "," : "");
        json_wait(o->w[i]);
        printf("}");
    }
    printf("]");
}

static void print_waiters(const struct ordered *o, int queued)
{
    if (!o->n) return;
    printf("  waiters  %zu announced (%s):\n", o->n,
           queued ? "in queue order" : "longest wait first");
    for (size_t i = 0; i < o->n; i++) {
        const rmutex_waitinfo_t *w = o->w[i];
        char who[400], t[32];
        struct holder h = waiter_process(w);
        holder_name(&h, who, sizeof who);
        span(w->waited_ms, t, sizeof t);
        printf("    %zu. %s  %s, %s for %s\n", i + 1, w->owner, who,
               w->kind == RMUTEX_WAIT_READ      ? "to read"
               : w->kind == RMUTEX_WAIT_WRITE   ? "to write"
               : w->kind == RMUTEX_WAIT_SEM     ? "for permits"
               : w->kind == RMUTEX_WAIT_BARRIER ? "at the barrier"
               : w->kind == RMUTEX_WAIT_ONCE    ? "while another runs it"
                                                : "waiting",
               t);
    }
}

/* The holder registry's description of h: an object, or null. */
static void json_holder(const struct holder *h)
{
    if (!h->known) {
        printf("null");
        return;
    }
    printf("{");
    json_process(h->host, h->pid, h->exe, h->cmd);
    printf(",\"lib\":");
    json_str(h->lib);
    printf("}");
}

static const char *mode_name(int mode)
{
    return mode == RMUTEX_RW_WRITE ? "write" : mode == RMUTEX_RW_READ ? "read" : "free";
}

/* A read-write lock's own fields, after the mutex's. */
static void json_rwlock(const rmutex_lockinfo_t *in)
{
    printf(",\"kind\":\"rwlock\",\"mode\":\"%s\",\"writer\":", mode_name(in->mode));
    if (in->mode == RMUTEX_RW_WRITE) json_str(in->owner);
    else printf("null");
    printf(",\"readers\":%u,\"reader\":[", in->readers);
    for (unsigned i = 0; i < in->readers_shown; i++) {
        const rmutex_readerinfo_t *rd = &in->reader[i];
        struct holder h = HOLDER_OF(rd);
        printf("%s{\"owner\":", i ? "," : "");
        json_str(rd->owner);
        printf(",\"holds\":%u,\"ttl_ms\":%lld,\"holder\":", rd->holds, (long long)rd->ttl_ms);
        json_holder(&h);
        printf(",\"held_ms\":");
        if (rd->held_ms >= 0) printf("%lld}", (long long)rd->held_ms);
        else printf("null}");
    }
    printf("],\"queued_readers\":%u,\"queued_writers\":%u", in->queued_readers, in->queued_writers);
}

static void print_json(const char *name, const rmutex_lockinfo_t *in, const struct ordered *o)
{
    int rw = in->kind == RMUTEX_KIND_RWLOCK;
    struct holder h = HOLDER_OF(in);
    printf("{\"name\":");
    json_str(name);
    printf(",\"state\":\"%s\",\"owner\":", in->held ? "held" : "free");
    if (in->held) json_str(in->owner);
    else printf("null");
    printf(",\"holder\":");
    if (in->held) json_holder(&h);
    else printf("null");
    printf(",\"held_ms\":");
    if (in->held && in->held_ms >= 0) printf("%lld", (long long)in->held_ms);
    else printf("null");
    printf(",\"cached\":\"%s\"", in->cached == RMUTEX_CACHED_PARKED ? "parked"
                                 : in->cached                      ? "kept"
                                                                   : "no");
    printf(",\"ttl_ms\":%lld,\"fence\":%llu,\"owner_died\":%s,\"not_recoverable\":%s,"
           "\"queue_length\":%u,\"queue\":[",
           (long long)in->ttl_ms, (unsigned long long)in->fence, in->owner_died ? "true" : "false",
           in->not_recoverable ? "true" : "false", in->queue_len);
    for (unsigned i = 0; i < in->queue_shown; i++) {
        printf("%s{\"id\":", i ? "," : "");
        json_str(in->queue[i]);
        printf(",\"alive_ms\":%lld", (long long)in->queue_alive_ms[i]);
        if (rw) printf(",\"wants\":\"%s\"", in->queue_mode[i] == 'w' ? "write" : "read");
        putchar('}');
    }
    printf("],\"subscribers\":%u,\"server_time_ms\":%lld", in->subscribers,
           (long long)in->server_time_ms);
    if (rw) json_rwlock(in);
    if (o) json_waiters(o);
    printf("}\n");
}

/* The holder registry's lines of h (or why there are none), indent more
 * spaces in. */
static void print_holder(const struct holder *h, int indent)
{
    char t[32];
    if (h->known) {
        printf("%*s  holder   pid %ld on %s, librmutex %s\n", indent, "", h->pid, h->host, h->lib);
        if (h->cmd[0]) printf("%*s  command  %s\n", indent, "", h->cmd);
        else if (h->exe[0]) printf("%*s  program  %s\n", indent, "", h->exe);
    } else {
        printf("%*s  holder   not announced (another client, or RMUTEX_ANNOUNCE=0)\n", indent, "");
    }
    if (h->held_ms >= 0) span(h->held_ms, t, sizeof t);
    printf("%*s  held     %s\n", indent, "",
           h->held_ms >= 0 ? t : "unknown (about a second or less, or not announced)");
}

/* A read-write lock's readers: each one described, its process under it. */
static void print_readers(const rmutex_lockinfo_t *in)
{
    printf("  readers  %u\n", in->readers);
    for (unsigned i = 0; i < in->readers_shown; i++) {
        const rmutex_readerinfo_t *rd = &in->reader[i];
        struct holder h = HOLDER_OF(rd);
        printf("  reader   %s, %u hold%s, lease %.1fs left\n", rd->owner, rd->holds,
               rd->holds == 1 ? "" : "s", (double)rd->ttl_ms / 1000);
        print_holder(&h, 2);
    }
    if (in->readers > in->readers_shown) printf("  reader   ... %u more\n", in->readers - in->readers_shown);
}

static void print_human(const char *name, const rmutex_lockinfo_t *in, const struct ordered *o)
{
    int rw = in->kind == RMUTEX_KIND_RWLOCK;
    struct holder h = HOLDER_OF(in);
    printf("%s  %s\n", name, in->held ? "held" : "free");
    if (rw) printf("  kind     read-write lock, %s\n", in->mode == RMUTEX_RW_WRITE ? "written"
                                                     : in->mode == RMUTEX_RW_READ ? "read"
                                                                                  : "free");
    if (rw && in->mode == RMUTEX_RW_READ) {
        print_readers(in);
    } else if (in->held) {
        printf("  %-9s%s\n", rw ? "writer" : "owner", in->owner);
        print_holder(&h, 0);
    }
    if (in->held) {
        printf("  lease    %.1fs left\n", (double)in->ttl_ms / 1000);
        if (in->cached == RMUTEX_CACHED_PARKED)
            printf("  cached   parked by its process: nobody inside, a lock elsewhere takes it over\n");
        else if (in->cached)
            printf("  cached   kept by its process between its threads' holds; a lock elsewhere asks for it\n");
    }
    printf("  fence    %llu\n", (unsigned long long)in->fence);
    printf("  robust   owner-died: %s   not-recoverable: %s\n", in->owner_died ? "yes" : "no",
           in->not_recoverable ? "yes" : "no");
    if (in->queue_len) {
        if (rw) printf("  queue    %u waiting (%u reader%s, %u writer%s, in order):", in->queue_len,
                       in->queued_readers, in->queued_readers == 1 ? "" : "s", in->queued_writers,
                       in->queued_writers == 1 ? "" : "s");
        else printf("  queue    %u waiting (fair):", in->queue_len);
        for (unsigned i = 0; i < in->queue_shown; i++)
            printf("%s %s%s (%.1fs)", i ? "," : "", !rw ? "" : in->queue_mode[i] == 'w' ? "writer " : "reader ",
                   in->queue[i], (double)in->queue_alive_ms[i] / 1000);
        printf("%s\n", in->queue_len > in->queue_shown ? ", ..." : "");
    }
    printf("  waiting  %u subscribed\n", in->subscribers);
    print_waiters(o, in->queue_len > 0);
}

/* A semaphore (rsem_inspect): its value, the processes holding permits,
 * each with its registry lines, and its fair queue's length. */
static void print_sem_human(const char *name, const rsem_info_t *si, const struct ordered *o)
{
    printf("%s  %s\n", name, si->processes ? "held" : "free");
    printf("  kind     semaphore, %d permit%s free", si->value, si->value == 1 ? "" : "s");
    if (si->lapsed) printf(" (and %u of dead or stalled processes, back at the next call)", si->lapsed);
    printf("\n  holders  %u process%s\n", si->processes, si->processes == 1 ? "" : "es");
    for (unsigned i = 0; i < si->shown; i++) {
        const rmutex_readerinfo_t *p = &si->holder[i];
        struct holder h = HOLDER_OF(p);
        printf("  process  %.*s, %u permit%s, lease %.1fs %s\n", (int)(strlen(p->owner) - 2), p->owner,
               p->holds, p->holds == 1 ? "" : "s", (double)(p->ttl_ms < 0 ? -p->ttl_ms : p->ttl_ms) / 1000,
               p->ttl_ms < 0 ? "past" : "left");
        print_holder(&h, 2);
    }
    if (si->processes > si->shown) printf("  process  ... %u more\n", si->processes - si->shown);
    if (si->queued) printf("  queue    %u waiting (fair)\n", si->queued);
    print_waiters(o, 0);
}

static void print_sem_json(const char *name, const rsem_info_t *si, const struct ordered *o)
{
    printf("{\"name\":");
    json_str(name);
    printf(",\"state\":\"%s\",\"kind\":\"semaphore\",\"value\":%d,\"lapsed\":%u,\"processes\":%u,"
           "\"queued\":%u,\"holders\":[",
           si->processes ? "held" : "free", si->value, si->lapsed, si->processes, si->queued);
    for (unsigned i = 0; i < si->shown; i++) {
        const rmutex_readerinfo_t *p = &si->holder[i];
        struct holder h = HOLDER_OF(p);
        printf("%s{\"process\":", i ? "," : "");
        char uuid[64];
        snprintf(uuid, sizeof uuid, "%.*s", (int)(strlen(p->owner) - 2), p->owner);
        json_str(uuid);
        printf(",\"permits\":%u,\"lease_ms\":%lld,\"holder\":", p->holds, (long long)p->ttl_ms);
        json_holder(&h);
        printf("}");
    }
    printf("]");
    json_waiters(o);
    printf("}\n");
}

static void status_usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] status [--json] NAME...\n"
          "Show locks without touching them: free or held, the holder, the lease left, the\n"
          "fencing counter, the robust marks, the fair queue, the waiters subscribed; a\n"
          "read-write lock's mode, writer, readers and queue; a semaphore's free permits and\n"
          "the processes that hold permits (rmutex run --permits).\n"
          "      --json   one JSON object per name, one per line\n"
          "Exit: 0 every name held; 3 one is free; 4 one could not be read; 64 usage.\n",
          f);
}

int cmd_status(int argc, char **argv)
{
    int json = 0, names = 0, code = 0, r;
    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            status_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            err("status: unknown option %s", argv[i]);
            return EXIT_USAGE;
        }
    }
    if ((r = configure())) return r;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) continue;
        names++;
        rmutex_lockinfo_t in;
        r = rmutex_inspect(argv[i], &in, sizeof in);
        if (r) {
            if (redis_failed("status", argv[i], r) == EXIT_USAGE) return EXIT_USAGE;
            code = 4;
            continue;
        }
        /* Its waiters, from the registry (a failure there leaves them out:
         * the lock's own state was read). */
        struct waits ws = { 0 };
        struct ordered o;
        if (waits_collect(argv[i], &ws))
            say("status: %s: the waiters could not be read: %s", argv[i], rmutex_detail());
        order_waiters(argv[i], &in, &ws, &o);
        /* A semaphore of the name, when no lock of it is held or queued for
         * (the keys are apart: a name may be both, rarely). */
        rsem_info_t si;
        if (!in.held && !in.queue_len && !rsem_inspect(argv[i], &si, sizeof si) && si.exists) {
            if (json) print_sem_json(argv[i], &si, &o);
            else print_sem_human(argv[i], &si, &o);
            if (!si.processes && code == 0) code = 3;
        } else {
            if (json) print_json(argv[i], &in, &o);
            else print_human(argv[i], &in, &o);
            if (!in.held && code == 0) code = 3;
        }
        free(o.w);
        waits_free(&ws);
    }
    if (!names) {
        err("status: a lock name is needed");
        return EXIT_USAGE;
    }
    return code;
}

static void wait_usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] wait [-w DURATION] [-E N] [--held|--free] NAME\n"
          "Wait until the lock NAME is free (or held), without taking it.\n"
          "  -w, --timeout DUR  wait at most DUR (seconds, or 500ms, 30s, 2m, 1h)\n"
          "  -E N               the exit code at that deadline (default 1)\n"
          "      --held         until it is held\n"
          "      --free         until it is free (the default)\n"
          "Exit: 0 seen; the -E code at the deadline; 64 usage; 69 Redis unreachable;\n"
          "76 a Redis error; 77 login or ACL refused.\n",
          f);
}

int cmd_wait(int argc, char **argv)
{
    int held = 0, has_timeout = 0, conflict = 1;
    int64_t timeout = 0;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (wants_help(a)) {
            wait_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--held")) {
            held = 1;
        } else if (!strcmp(a, "--free")) {
            held = 0;
        } else if ((!strcmp(a, "-w") || !strcmp(a, "--timeout")) && i + 1 < argc) {
            if (parse_duration(argv[++i], &timeout)) {
                err("wait: -w takes a duration");
                return EXIT_USAGE;
            }
            has_timeout = 1;
        } else if (!strcmp(a, "-E") && i + 1 < argc) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 0 || n > 255) {
                err("wait: -E takes a number in 0..255");
                return EXIT_USAGE;
            }
            conflict = (int)n;
        } else if (a[0] == '-' && a[1]) {
            err("wait: unknown option %s", a);
            return EXIT_USAGE;
        } else if (!name) {
            name = a;
        } else {
            err("wait: one lock name at a time");
            return EXIT_USAGE;
        }
    }
    if (!name) {
        err("wait: a lock name is needed");
        return EXIT_USAGE;
    }
    int r = configure();
    if (r) return r;
    report_outages();
    int64_t deadline = mono_ns() + timeout;
    for (;;) {
        rmutex_lockinfo_t in;
        r = rmutex_inspect(name, &in, sizeof in);
        if (r && r != ETIMEDOUT) return redis_failed("wait", name, r);
        if (!r && in.held == held) return 0;
        if (has_timeout && mono_ns() >= deadline) return r ? redis_failed("wait", name, r) : conflict;
        struct timespec pause = { 0, 50000000 };
        nanosleep(&pause, NULL);
    }
}

struct listing {
    int json;
    struct waits waits; /* every announced wait */
};

/* One line per lock (or one JSON object, as status --json gives), with
 * how many announced waits it has. */
static int list_one(const char *name, const rmutex_lockinfo_t *in, void *arg)
{
    const struct listing *x = arg;
    struct ordered o;
    order_waiters(name, in, &x->waits, &o);
    if (x->json) {
        print_json(name, in, &o);
        free(o.w);
        return 0;
    }
    char who[160], held[32] = "?";
    struct holder h = HOLDER_OF(in);
    holder_name(&h, who, sizeof who);
    if (in->held_ms >= 0) span(in->held_ms, held, sizeof held);
    if (in->mode == RMUTEX_RW_READ) {
        printf("%s\tread by %u:", name, in->readers);
        for (unsigned i = 0; i < in->readers_shown; i++) {
            struct holder r = HOLDER_OF(&in->reader[i]);
            holder_name(&r, who, sizeof who);
            printf("%s %s", i ? "," : "", who);
        }
        printf("%s\tlease %.1fs left", in->readers > in->readers_shown ? ", ..." : "",
               (double)in->ttl_ms / 1000);
    } else {
        printf("%s\t%s %s by %s\tlease %.1fs left", name,
               in->mode == RMUTEX_RW_WRITE ? "written" : "held", held, who, (double)in->ttl_ms / 1000);
    }
    if (in->queue_len) printf("\t%u queued", in->queue_len);
    if (o.n) printf("\t%zu waiting", o.n);
    putchar('\n');
    free(o.w);
    return 0;
}

static void list_usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] list [--json] [PATTERN]\n"
          "List the held locks whose names match PATTERN (a Redis glob; default *).  It SCANs\n"
          "the whole keyspace of every primary: for operators, not for scripts run often.\n"
          "      --json   status's JSON objects, one per line\n"
          "Exit: 0 (also when nothing matches); 64 usage; 69 Redis unreachable; 76 a Redis\n"
          "error; 77 login or ACL refused (SCAN not allowed).\n",
          f);
}

int cmd_list(int argc, char **argv)
{
    struct listing x = { 0 };
    const char *pattern = NULL;
    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            list_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            x.json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            err("list: unknown option %s", argv[i]);
            return EXIT_USAGE;
        } else if (!pattern) {
            pattern = argv[i];
        } else {
            err("list: one pattern at most");
            return EXIT_USAGE;
        }
    }
    int r = configure();
    if (r) return r;
    if (waits_collect(NULL, &x.waits))
        say("list: the waiters could not be read: %s", rmutex_detail());
    r = rmutex_list(pattern ? pattern : "*", list_one, &x);
    waits_free(&x.waits);
    return r ? redis_failed("list", NULL, r) : 0;
}
