/* cli.h -- what the parts of the rmutex command share: exit codes, the
 * global options, durations and messages (common.c), the waiting line
 * (progress.c), and the subcommands' entry points (run.c, unlock.c,
 * status.c), which main.c calls. */
#ifndef RMUTEX_CLI_H
#define RMUTEX_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <rmutex.h>

/* Exit codes (besides a child's own status, 128+N for a signal, and the
 * conflict code of -E).  sysexits(3) values where one fits. */
enum {
    EXIT_USAGE = 64,       /* EX_USAGE: bad options */
    EXIT_UNAVAILABLE = 69, /* EX_UNAVAILABLE: Redis cannot be reached */
    EXIT_OSERR = 71,       /* EX_OSERR: fork, pipe, signalfd failed */
    EXIT_LOST = 75,        /* EX_TEMPFAIL: the lock was lost under the command */
    EXIT_PROTOCOL = 76,    /* EX_PROTOCOL: Redis answered something unexpected */
    EXIT_NOPERM = 77,      /* EX_NOPERM: credentials or ACL refused */
    EXIT_MAXTIME = 124,    /* timeout(1): --max-time */
    EXIT_CANNOT_EXEC = 126,
    EXIT_NOT_FOUND = 127,
};

struct global {
    const char *url;  /* --url, else RMUTEX_URL, else the library's default */
    int verbose, quiet;
};
extern struct global g;

/* A duration: a decimal number of seconds ("1.5"), or with a unit (ms, s,
 * m, h).  Returns 0 and *ns, or -1. */
int parse_duration(const char *s, int64_t *ns);

/* "rmutex: " and the message on stderr (not with -q, except errors). */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether arg asks for help (-h, --help). */
int wants_help(const char *arg);

/* Say why a call that talks to Redis failed ("rmutex: WHAT: NAME: why";
 * name may be NULL) and return the exit code for it. */
int redis_failed(const char *what, const char *name, int rc);

/* Tell outages from now on: a line when Redis cannot be reached, one when
 * it can again.  redis_down(): whether the last one told is still on. */
void report_outages(void);
int redis_down(void);

/* Configure the library from --url (when given). 0 or an exit code. */
int configure(void);

/* The subcommands: argv[0] is the subcommand's name.  The exit code. */
int cmd_run(int argc, char **argv);
int cmd_unlock(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_deadlocks(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* Every process's published counters (rmutex_metrics), sorted by their
 * labels (name, host, pid, program) with series of the same labels summed
 * (stats.c).  0 and *out (free it), or rmutex_metrics's error. */
int metrics_collect(rmutex_metricinfo_t **out, size_t *n);
/* qsort's order of two rmutex_metricinfo_t: by name, host, pid, program. */
int metrics_compare(const void *a, const void *b);
/* m's counts added to *to's. */
void metrics_add(rmutex_metricinfo_t *to, const rmutex_metricinfo_t *m);
/* The base name of m's executable. */
const char *program_of(const rmutex_metricinfo_t *m);

/* A process holding a lock (a mutex's holder, a read-write lock's writer
 * or one of its readers) as rmutex_inspect tells it: its owner id and
 * what the holder registry says (known 0: nothing).  HOLDER_OF(p) for a
 * rmutex_lockinfo_t or a rmutex_readerinfo_t. */
struct holder {
    const char *owner;
    int known;
    long pid;
    const char *host, *exe, *cmd, *lib;
    int64_t held_ms;
};
#define HOLDER_OF(p)                                                                            \
    { (p)->owner, (p)->holder_known, (p)->holder_pid, (p)->holder_host, (p)->holder_exe,        \
      (p)->holder_cmd, (p)->holder_lib, (p)->held_ms }

/* A holder in a few words: "pid 4242 on web1 (cron-import)" from the
 * holder registry, else its owner id. */
void holder_name(const struct holder *h, char *buf, size_t size);

/* The waiting line (progress.c): started while run waits, on a terminal
 * only (NULL otherwise); progress_stop() clears it (NULL: nothing). */
struct progress;
struct progress *progress_start(const char *name, const char *queue);
void progress_stop(struct progress *p);

/* s as a JSON string on stdout (escaped as JSON needs). */
void json_str(const char *s);

/* A process's fields ("host":..,"pid":..,"exe":..,"cmd":..), and a
 * wait's (its thread, kind, time, detection, then its process's), without
 * braces. */
void json_process(const char *host, long pid, const char *exe, const char *cmd);
void json_wait(const rmutex_waitinfo_t *w);

/* A duration for people: 850ms, 12.3s, 4m05s, 2h07m, 3d04h. */
void span(int64_t ms, char *buf, size_t size);

/* The announced waits (rmutex_waits) for name (NULL: all), copied into an
 * array.  0 or rmutex_waits's error (nothing to free then). */
struct waits {
    rmutex_waitinfo_t *w;
    size_t n, cap;
};
int waits_collect(const char *name, struct waits *ws);
void waits_free(struct waits *ws);

/* A waiting thread's process as a struct holder (for holder_name). */
struct holder waiter_process(const rmutex_waitinfo_t *w);

/* "mutex", "fair", "read", "write", "cond". */
const char *wait_kind_name(char kind);

/* CLOCK_MONOTONIC now, in ns. */
int64_t mono_ns(void);

#endif
