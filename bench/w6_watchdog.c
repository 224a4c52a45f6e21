#include "bench.h"
void w6_run(void) {}
