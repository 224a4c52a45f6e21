/* swap_pthread_test.cc -- swap_body.inc against glibc's <pthread.h>: the
 * reference the swapped build must match. */
#include <pthread.h>

#include "harness.h"

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

class SwapPthread : public ::testing::Test {};
#define SWAP_ACROSS_PROCESSES 0
#define SWAP_FIXTURE SwapPthread
#include "swap_body.inc"
