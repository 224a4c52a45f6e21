/* say.h -- the one-line messages of the header swap and the preload shim. */
#ifndef RM_SAY_H
#define RM_SAY_H

/* One line on stderr: "rmutex WHO[PROGRAM PID]: MESSAGE", in one write(2)
 * (not interleaved with the program's stdio buffers, no stdio lock taken).
 * errno is kept. */
void rm_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* WHO in the prefix: "pthread" (the header swap, the default) or
 * "preload" (the shim, set by its constructor before it says anything). */
void rm_say_as(const char *who);

#endif
