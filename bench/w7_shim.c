#include "bench.h"
void w7_run(void) {}
