/* session.h -- the process's session with its Redis deployment: the
 * configuration, a lazy start on the first call that talks to Redis, the
 * endpoint, and the count of calls in progress that a shutdown waits on. */
#ifndef RM_SESSION_H
#define RM_SESSION_H

struct rm_endpoint;

/* Enter a call that talks to Redis: starts the session on first use (from
 * rmutex_configure's URL, else RMUTEX_URL, else the default URL) and
 * returns the endpoint.  Returns 0 or the error of a bad URL / ENOMEM.
 * Every successful enter is paired with rm_session_leave(); a shutdown is
 * refused while any is open. */
int rm_session_enter(struct rm_endpoint **ep);
void rm_session_leave(void);

/* rmutex_configure(url): EBUSY once started (until a shutdown). */
int rm_session_configure(const char *url);

/* A shutdown, in two steps around what the layers above stop: begin
 * returns the endpoint (the session now refuses new calls) or NULL --
 * not started (*r = 0), or busy (*r = EBUSY, with the detail: a call is in
 * progress or busy(), asked with the session's lock held, says so); end
 * destroys the endpoint and returns to "not started". */
struct rm_endpoint *rm_session_stop_begin(int (*busy)(void), int *r);
void rm_session_stop_end(void);

/* Run fn(endpoint) at process exit if the session is running then
 * (registered once, by the layer above: it gives the holds back). */
void rm_session_on_exit(void (*fn)(struct rm_endpoint *ep));

/* fork(): -1 lock (prepare; taken first: the session's lock is the
 * outermost), 0 unlock (parent), 1 child: no call in progress, unlock.
 * The endpoint, for the other modules' handlers: NULL when not started. */
void rm_session_atfork(int who);
struct rm_endpoint *rm_session_endpoint(void);

#endif
