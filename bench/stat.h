/* stat.h -- order statistics over small and large sets of doubles. */
#ifndef BENCH_STAT_H
#define BENCH_STAT_H

#include <stddef.h>

#define MAXREP 64

/* The values of one figure, one per repetition. */
struct sample {
    double v[MAXREP];
    int n;
};

void sample_add(struct sample *s, double v);
void sample_merge(struct sample *into, const struct sample *from);
double sample_median(const struct sample *s);
double sample_min(const struct sample *s);
double sample_max(const struct sample *s);

/* Sorts v in place. */
void sort_doubles(double *v, size_t n);
/* The q-quantile (0..1) of sorted v, by linear interpolation. */
double quantile_sorted(const double *v, size_t n, double q);

#endif
