/* machine.c -- the machine line of the report: cores, CPU, kernel, the
 * redis-server's version, and the load average before and after the run
 * (a busy machine shows there, and in the spread of the RTT limit). */
#include "machine.h"
#include "bench.h"
#include "report.h"
#include "server.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + (v[1] == ' ');
                v[strcspn(v, "\n")] = 0;
                snprintf(buf, n, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

static void loadavg(char *buf, size_t n)
{
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    double a, b, c;
    if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, n, "%.2f %.2f %.2f", a, b, c);
    fclose(f);
}

void machine_facts(int argc, char **argv)
{
    char model[256], load[64], cmd[256] = "", when[64];
    struct utsname u;
    uname(&u);
    cpu_model(model, sizeof model);
    cpu_set_t set;
    int usable = sched_getaffinity(0, sizeof set, &set) ? -1 : CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    report_fact("machine", "%ld cores online (%d usable by this process), %s, %s %s %s", online,
                usable, model, u.sysname, u.release, u.machine);
    redisContext *c = server_connect();
    char ver[64] = "?";
    if (c) {
        redisReply *r = rcmd(c, "INFO server");
        char *p = r ? strstr(r->str, "redis_version:") : NULL;
        if (p) snprintf(ver, sizeof ver, "%.*s", (int)strcspn(p + 14, "\r\n"), p + 14);
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    report_fact("redis", "redis-server %s, %s", ver,
                srv.pid ? "started by the benchmark (--save '' --appendonly no), loopback TCP"
                        : "given by --url");
    report_fact("rmutex", "librmutex %s", rmutex_version_string());
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, "%s%s", i ? " " : "", argv[i]);
    }
    report_fact("command", "%s", cmd);
    time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
    report_fact("date", "%s", when);
    loadavg(load, sizeof load);
    report_fact("load", "%s at the start (1, 5, 15 min)", load);
}

void machine_end(double seconds)
{
    char load[64];
    loadavg(load, sizeof load);
    report_fact("load", "%s at the end; the run took %.0f s", load, seconds);
}
