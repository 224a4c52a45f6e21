/* stat.c -- medians, quantiles and extremes for the benchmark's figures.
 *
 * Every figure of the table is a median with its min and max over the
 * repetitions (struct sample); distributions inside one repetition (hand-off
 * latencies, Redis-side script times) use quantiles of a sorted array. */
#include "stat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sample_add(struct sample *s, double v)
{
    if (s->n < MAXREP) s->v[s->n++] = v;
}

void sample_merge(struct sample *into, const struct sample *from)
{
    for (int i = 0; i < from->n; i++) sample_add(into, from->v[i]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void sort_doubles(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

double sample_median(const struct sample *s)
{
    if (s->n == 0) return NAN;
    double v[MAXREP];
    memcpy(v, s->v, sizeof(double) * (size_t)s->n);
    sort_doubles(v, (size_t)s->n);
    return s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
}

double sample_min(const struct sample *s)
{
    if (s->n == 0) return NAN;
    double m = s->v[0];
    for (int i = 1; i < s->n; i++) m = s->v[i] < m ? s->v[i] : m;
    return m;
}

double sample_max(const struct sample *s)
{
    if (s->n == 0) return NAN;
    double m = s->v[0];
    for (int i = 1; i < s->n; i++) m = s->v[i] > m ? s->v[i] : m;
    return m;
}

double quantile_sorted(const double *v, size_t n, double q)
{
    if (n == 0) return NAN;
    if (q <= 0) return v[0];
    if (q >= 1) return v[n - 1];
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}
