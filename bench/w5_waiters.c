#include "bench.h"
void w5_run(void) {}
