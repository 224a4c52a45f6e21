/* heapcount.h -- net bytes malloc'ed by the whole process while counting. */
#ifndef BENCH_HEAPCOUNT_H
#define BENCH_HEAPCOUNT_H

#include <stdint.h>

void heapcount_start(void);
/* Bytes allocated minus bytes freed (usable sizes) since heapcount_start(). */
int64_t heapcount_net(void);
void heapcount_stop(void);

#endif
