/* unlock.c -- rmutex unlock --force [--if-owner ID] NAME: an operator breaks
 * a lock.
 *
 * The command never holds a lock of its own, so an unlock is always someone
 * else's hold: without --force it is a usage error.  --if-owner makes it a
 * compare-and-delete (rmutex_force_unlock_owner): the hold is removed only
 * if that owner still has it, so a hold taken after the operator looked is
 * left alone.  It prints what it removed.  Exit 0 released, 1 not held or
 * another owner, 69 unreachable, 76 a Redis error (the name taken by other
 * data), 77 refused. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] unlock --force [--if-owner ID] NAME\n"
          "Break the lock NAME, whoever holds it, and say whose it was.\n"
          "  -f, --force        required: this command never holds a lock of its own\n"
          "      --if-owner ID  only if ID (the holder's RMUTEX_OWNER) still holds it\n"
          "Exit: 0 released; 1 not held, or held by another than ID; 64 usage; 69 Redis\n"
          "unreachable; 76 a Redis error; 77 login or ACL refused.\n",
          f);
}

int cmd_unlock(int argc, char **argv)
{
    int force = 0;
    const char *owner = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f")) {
            force = 1;
        } else if (!strcmp(argv[i], "--if-owner") && i + 1 < argc) {
            owner = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            err("unlock: unknown option %s", argv[i]);
            return EXIT_USAGE;
        } else if (!name) {
            name = argv[i];
        } else {
            err("unlock: one lock name at a time");
            return EXIT_USAGE;
        }
    }
    if (!name) {
        err("unlock: a lock name is needed");
        return EXIT_USAGE;
    }
    if (!force) {
        err("unlock: this command never holds a lock, so this would break someone else's: "
            "say --force");
        return EXIT_USAGE;
    }
    int r = configure();
    if (r) return r;
    char holder[256];
    r = rmutex_force_unlock_owner(name, owner, holder, sizeof holder);
    switch (r) {
    case 0:
        printf("released %s (held by %s)\n", name, holder);
        return 0;
    case ENOENT:
        printf("%s was not held\n", name);
        return 1;
    case ESRCH:
        printf("%s is held by %s, not %s: left alone\n", name, holder, owner);
        return 1;
    default:
        return redis_failed("unlock", name, r);
    }
}
