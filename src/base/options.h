/* options.h -- a URL's options (options.def), parsed, and applied to the
 * settings. */
#ifndef RM_OPTIONS_H
#define RM_OPTIONS_H

/* RM_OPT_<name>: an option, in options.def's order. */
enum {
#define RM_OPTION(name, ...) RM_OPT_##name,
#define RM_URL_OPTION(name, ...) RM_OPT_##name,
#define RM_URL_TEXT(name, ...) RM_OPT_##name,
#include "options.def"
    RM_OPT_COUNT
};

/* The options of one URL. */
struct rm_options {
    unsigned long value[RM_OPT_COUNT]; /* a number: the URL's, else the default */
    unsigned char set[RM_OPT_COUNT];   /* 1: the URL names it */
#define RM_URL_TEXT(name, text) char *name; /* decoded, allocated; NULL: not given */
#include "options.def"
};

/* Every option unset, at its default. */
void rm_options_init(struct rm_options *o);

/* The query: "name=value&..." (after the '?', to the end of the string)
 * into o.  Returns 0, EINVAL (unknown option, no value, a number out of its
 * range, a bad percent-escape) or ENOMEM, with the detail set. */
int rm_options_parse(const char *query, struct rm_options *o);

/* The settings o names, into rm_settings; the others keep their values. */
void rm_options_apply(const struct rm_options *o);

/* Release o's strings (a password zeroed first). */
void rm_options_free(struct rm_options *o);

#endif
