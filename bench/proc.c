/* proc.c -- runs redis-benchmark (RTT limit) and the W7 program (plain and
 * under LD_PRELOAD) and captures their standard output. */
#include "proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int named(const char *var, const char *name_eq)
{
    size_t n = strcspn(name_eq, "=");
    return !strncmp(var, name_eq, n) && var[n] == '=';
}

int run_capture(const char *const *argv, const char *const *env_add, const char *const *env_del,
                char *buf, size_t size)
{
    size_t nenv = 0, nadd = 0;
    while (environ[nenv]) nenv++;
    while (env_add && env_add[nadd]) nadd++;
    char **env = calloc(nenv + nadd + 1, sizeof *env);
    if (!env) return -1;
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        int drop = 0;
        for (size_t j = 0; j < nadd; j++) drop |= named(environ[i], env_add[j]);
        for (size_t j = 0; env_del && env_del[j]; j++) {
            size_t n = strlen(env_del[j]);
            drop |= !strncmp(environ[i], env_del[j], n) && environ[i][n] == '=';
        }
        if (!drop) env[k++] = environ[i];
    }
    for (size_t j = 0; j < nadd; j++) env[k++] = (char *)env_add[j];
    env[k] = NULL;

    int fds[2];
    if (pipe(fds)) {
        free(env);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        free(env);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvpe(argv[0], (char *const *)argv, env);
        fprintf(stderr, "bench: cannot run %s\n", argv[0]);
        _exit(127);
    }
    free(env);
    close(fds[1]);
    size_t got = 0;
    char sink[4096];
    for (;;) {
        int room = got + 1 < size;
        ssize_t r = read(fds[0], room ? buf + got : sink, room ? size - 1 - got : sizeof sink);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (room) got += (size_t)r;
    }
    close(fds[0]);
    if (size) buf[got < size ? got : size - 1] = 0;
    int status;
    while (waitpid(pid, &status, 0) < 0) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
