/* machine.h -- facts about the machine and the run, for the report. */
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

void machine_facts(int argc, char **argv);
void machine_end(double seconds);

#endif
