/* report.h -- the result table: one row per figure, printed as text, CSV
 * and Markdown. */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include "stat.h"

#include <stdio.h>

enum judge { J_NONE, J_LE, J_GE };   /* the figure must be <= or >= the bound */
enum judge_on { ON_VALUE, ON_RATIO }; /* the bound applies to the value or value/limit */

struct row {
    char id[8];
    char figure[96];
    char unit[16];
    struct sample s;      /* one value per repetition */
    double limit;         /* NAN: none */
    const double *limit_ref; /* or: *limit_ref * limit_factor, read when judged */
    double limit_factor;
    char limit_name[48];
    char target[40];      /* as printed */
    int judge, on, worst; /* worst: judge the worst repetition, not the median */
    double bound;
    char status[12];      /* filled by report_judge(): met, MISSED, n/a, or "" */
    char note[96];
};

/* A new row (zeroed, no limit, no target). */
struct row *report_row(const char *id, const char *figure, const char *unit, const struct sample *s);
void row_limit(struct row *r, double limit, const char *name);
/* A limit known only at the end of the run (the RTT limit is measured
 * again after the workloads): *ref * factor. */
void row_limit_ref(struct row *r, const double *ref, double factor, const char *name);
void row_target(struct row *r, const char *text, int on, int judge, double bound, int worst);
void row_na(struct row *r, const char *why);

/* Machine and run facts printed above the table. */
void report_fact(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Resolve late limits, put the RTT rows first, judge the targets. */
void report_judge(void);
void report_print(FILE *f);
int report_csv(const char *path);
int report_markdown(const char *path);

/* A number as the table prints it. */
const char *fmt_num(double v, char *buf, size_t n);

#endif
