/* fuzz_url.c -- rm_config_parse(), the URL parser behind rmutex_configure
 * and RMUTEX_URL, on any bytes.  Built with RM_CONFIG_NO_DNS: a host name
 * is never looked up (only numeric addresses and unix sockets resolve).
 * Every input must give 0 or a clear error code with a detail, never a
 * crash or a leak; a parsed address must be well formed, and with TLS
 * (rediss://, tls=1 and its options) every address must point at the
 * service's TLS configuration, in a copy too. */
#include "config.h"
#include "internal.h"

#include <errno.h>
#include "fuzz_util.h"

#include <stdint.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

/* TLS, if any, is the service's own, and every address says so. */
static void check_tls(const struct rm_service *a)
{
    for (unsigned i = 0; i < a->nseeds; i++)
        if (a->seeds[i].tls != a->tls || !memchr(a->seeds[i].host, 0, sizeof a->seeds[i].host)) abort();
    if (a->node_login.tls != a->tls) abort();
    if (!a->tls) return;
    if (a->seeds[0].sa.ss_family == AF_UNIX) abort();
    if (!a->tls->cert != !a->tls->key) abort();
    if (a->tls->insecure != 0 && a->tls->insecure != 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = fuzz_cstring(data, size);
    if (!url) return 0;
    struct rm_service a;
    int r = rm_config_parse(url, &a, 0);
    if (r == 0) {
        if (!memchr(a.display, 0, sizeof a.display)) abort();
        if (a.nseeds < 1 || a.nseeds > RM_SEEDS_MAX) abort();
        for (unsigned i = 0; i < a.nseeds; i++)
            if (!memchr(a.seeds[i].display, 0, sizeof a.seeds[i].display)) abort();
        /* The password is masked (the user, shown, may hold any character,
         * so no more than that can be checked of the text). */
        if (a.seeds[0].password && !strstr(a.seeds[0].display, "***@")) abort();
        check_tls(&a);
        struct rm_service copy;
        if (!rm_config_service_copy(&a, &copy)) {
            if (!!copy.tls != !!a.tls || (a.tls && copy.tls == a.tls)) abort();
            check_tls(&copy);
            rm_config_service_free(&copy);
        }
        rm_config_service_free(&a);
    } else if (r != EINVAL && r != EAGAIN && r != ENOMEM) {
        abort();
    }
    if (!*rmutex_detail() && r) abort(); /* an error always says why */
    free(url);
    return 0;
}
