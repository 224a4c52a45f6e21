/* report.c -- collects the benchmark's figures and prints them.
 *
 * A row is one figure: its values over the repetitions (printed as median
 * and min-max), the limit it is held against, measured in the same run
 * (printed with its name, and the median divided by it as the ratio), and
 * the target, judged on the median -- or on the worst repetition for
 * figures that must hold every time (counts that must be zero).  The same
 * rows go to the terminal, to CSV and to a Markdown table for
 * BENCHMARKS.md. */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAXROWS 256
#define MAXFACTS 32

static struct row rows[MAXROWS];
static int nrows;
static char facts[MAXFACTS][2][256];
static int nfacts;

struct row *report_row(const char *id, const char *figure, const char *unit, const struct sample *s)
{
    static struct row spare;
    struct row *r = nrows < MAXROWS ? &rows[nrows++] : &spare;
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->figure, sizeof r->figure, "%s", figure);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    if (s) r->s = *s;
    r->limit = NAN;
    return r;
}

void row_limit(struct row *r, double limit, const char *name)
{
    r->limit = limit;
    snprintf(r->limit_name, sizeof r->limit_name, "%s", name);
}

void row_limit_ref(struct row *r, const double *ref, double factor, const char *name)
{
    r->limit_ref = ref;
    r->limit_factor = factor;
    snprintf(r->limit_name, sizeof r->limit_name, "%s", name);
}

void row_target(struct row *r, const char *text, int on, int judge, double bound, int worst)
{
    snprintf(r->target, sizeof r->target, "%s", text);
    r->on = on;
    r->judge = judge;
    r->bound = bound;
    r->worst = worst;
}

void row_na(struct row *r, const char *why)
{
    r->s.n = 0;
    snprintf(r->status, sizeof r->status, "n/a");
    snprintf(r->note, sizeof r->note, "%s", why);
}

void report_fact(const char *key, const char *fmt, ...)
{
    if (nfacts >= MAXFACTS) return;
    snprintf(facts[nfacts][0], sizeof facts[nfacts][0], "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(facts[nfacts][1], sizeof facts[nfacts][1], fmt, ap);
    va_end(ap);
    nfacts++;
}

const char *fmt_num(double v, char *buf, size_t n)
{
    double a = fabs(v);
    if (isnan(v)) snprintf(buf, n, "-");
    else if (a >= 1e7) snprintf(buf, n, "%.3g", v);
    else if (a >= 100 || v == floor(v)) snprintf(buf, n, "%.0f", v);
    else if (a >= 10) snprintf(buf, n, "%.1f", v);
    else if (a >= 1) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%.3f", v);
    return buf;
}

static double ratio(const struct row *r)
{
    if (r->s.n == 0 || isnan(r->limit) || r->limit == 0) return NAN;
    return sample_median(&r->s) / r->limit;
}

void report_judge(void)
{
    /* Stable: the RTT rows first, the rest in the order they came. */
    static struct row sorted[MAXROWS];
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nrows; i++)
            if ((strcmp(rows[i].id, "RTT") != 0) == pass) sorted[k++] = rows[i];
    memcpy(rows, sorted, sizeof(struct row) * (size_t)nrows);
    for (int i = 0; i < nrows; i++) {
        struct row *r = &rows[i];
        if (r->limit_ref) r->limit = *r->limit_ref * r->limit_factor;
        if (r->status[0] || r->judge == J_NONE) continue;
        if (r->s.n == 0) {
            snprintf(r->status, sizeof r->status, "n/a");
            continue;
        }
        double v = sample_median(&r->s);
        if (r->worst) v = r->judge == J_LE ? sample_max(&r->s) : sample_min(&r->s);
        if (r->on == ON_RATIO) v = isnan(r->limit) || r->limit == 0 ? NAN : v / r->limit;
        int ok = !isnan(v) && (r->judge == J_LE ? v <= r->bound : v >= r->bound);
        snprintf(r->status, sizeof r->status, "%s", ok ? "met" : "MISSED");
    }
}

/* The printable cells of a row. */
struct cells {
    char med[32], range[72], limit[96], ratio[32];
};

static void cells_of(const struct row *r, struct cells *c)
{
    char a[32], b[32];
    if (r->s.n == 0) {
        snprintf(c->med, sizeof c->med, "-");
        snprintf(c->range, sizeof c->range, "-");
    } else {
        fmt_num(sample_median(&r->s), c->med, sizeof c->med);
        snprintf(c->range, sizeof c->range, "%s–%s (%d)", fmt_num(sample_min(&r->s), a, sizeof a),
                 fmt_num(sample_max(&r->s), b, sizeof b), r->s.n);
    }
    if (isnan(r->limit)) snprintf(c->limit, sizeof c->limit, "-");
    else snprintf(c->limit, sizeof c->limit, "%s %s", r->limit_name, fmt_num(r->limit, a, sizeof a));
    fmt_num(ratio(r), c->ratio, sizeof c->ratio);
}

/* Width of a UTF-8 string in columns (the en dash and the signs count one). */
static int width(const char *s)
{
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

static void pad(FILE *f, const char *s, int w)
{
    fputs(s, f);
    for (int i = width(s); i < w; i++) fputc(' ', f);
    fputs("  ", f);
}

void report_print(FILE *f)
{
    for (int i = 0; i < nfacts; i++) fprintf(f, "%-10s %s\n", facts[i][0], facts[i][1]);
    fputc('\n', f);
    int w[9] = { 2, 6, 6, 11, 4, 16, 5, 6, 6 };
    const char *head[9] = { "id", "figure", "median", "min–max (reps)", "unit",
                            "limit (same run)", "ratio", "target", "status" };
    for (int k = 0; k < 9; k++) w[k] = width(head[k]) > w[k] ? width(head[k]) : w[k];
    for (int i = 0; i < nrows; i++) {
        struct cells c;
        cells_of(&rows[i], &c);
        const char *v[9] = { rows[i].id, rows[i].figure, c.med, c.range, rows[i].unit,
                             c.limit, c.ratio, rows[i].target, rows[i].status };
        for (int k = 0; k < 9; k++) w[k] = width(v[k]) > w[k] ? width(v[k]) : w[k];
    }
    for (int k = 0; k < 9; k++) pad(f, head[k], w[k]);
    fputc('\n', f);
    for (int i = 0; i < nrows; i++) {
        struct cells c;
        cells_of(&rows[i], &c);
        const char *v[9] = { rows[i].id, rows[i].figure, c.med, c.range, rows[i].unit,
                             c.limit, c.ratio, rows[i].target, rows[i].status };
        for (int k = 0; k < 9; k++) pad(f, v[k], w[k]);
        if (rows[i].note[0]) fprintf(f, "%s", rows[i].note);
        fputc('\n', f);
    }
}

static void csv_field(FILE *f, const char *s, int last)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
    fputc(last ? '\n' : ',', f);
}

int report_csv(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < nfacts; i++) fprintf(f, "# %s: %s\n", facts[i][0], facts[i][1]);
    fprintf(f, "id,figure,unit,reps,median,min,max,limit_name,limit,ratio,target,status,note\n");
    for (int i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        char reps[16];
        snprintf(reps, sizeof reps, "%d", r->s.n);
        csv_field(f, r->id, 0);
        csv_field(f, r->figure, 0);
        csv_field(f, r->unit, 0);
        fprintf(f, "%s,", reps);
        if (r->s.n) fprintf(f, "%.6g,%.6g,%.6g,", sample_median(&r->s), sample_min(&r->s), sample_max(&r->s));
        else fprintf(f, ",,,");
        csv_field(f, r->limit_name, 0);
        if (!isnan(r->limit)) fprintf(f, "%.6g", r->limit);
        fputc(',', f);
        if (!isnan(ratio(r))) fprintf(f, "%.6g", ratio(r));
        fputc(',', f);
        csv_field(f, r->target, 0);
        csv_field(f, r->status, 0);
        csv_field(f, r->note, 1);
    }
    return fclose(f);
}

int report_markdown(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < nfacts; i++) fprintf(f, "- **%s**: %s\n", facts[i][0], facts[i][1]);
    fprintf(f, "\n| id | figure | median | min–max (reps) | unit | limit (same run) | ratio | target | status |\n");
    fprintf(f, "|---|---|--:|--:|---|---|--:|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        struct cells c;
        cells_of(&rows[i], &c);
        const struct row *r = &rows[i];
        fprintf(f, "| %s | %s%s%s | %s | %s | %s | %s | %s | %s | %s |\n", r->id, r->figure,
                r->note[0] ? " — " : "", r->note, c.med, c.range, r->unit, c.limit, c.ratio,
                r->target, r->status);
    }
    return fclose(f);
}
