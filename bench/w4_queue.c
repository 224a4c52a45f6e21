#include "bench.h"
void w4_run(void) {}
