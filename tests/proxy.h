/* proxy.h -- a fault-injecting TCP proxy between rmutex and a real redis-server.
 *
 * The proxy listens on a free loopback port and forwards each connection to
 * the server, parsing the client's requests (RESP arrays of bulk strings, as
 * hiredis sends them) so that a test can pick one request and:
 *
 *   - drop_reply_of_next(): forward it, let the server execute it, and then,
 *     instead of forwarding the reply, close both sides of that connection
 *     (an "indeterminate reply": the command took effect, the client cannot
 *     know).  An optional hook runs on the proxy thread between the server's
 *     reply and the close, to change the world before the client retries.
 *   - drop_next_request(): close both sides instead of forwarding it (the
 *     server never sees it).
 *
 * Each arming fires once, except drop_requests(): every matching request,
 * on any connection, until disarm() (Redis unreachable for those only), and
 * stall_requests(): every matching request is swallowed, its connection
 * left open, until disarm() (Redis silent for those only: the client waits
 * for its command timeout) -- except on the connections whose CLIENT
 * SETNAME starts with spared (e.g. "rmutex:wd:", the watchdog's).
 * reset_connections(n): the next n connections made are reset (RST, not a
 * byte sent) as soon as their client sends something -- what a TLS port
 * does to plain text, and what a CLIENT KILL can look like.  One
 * event-loop thread serves every connection.
 */
#ifndef RMUTEX_TEST_PROXY_H
#define RMUTEX_TEST_PROXY_H

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rmt {

class Proxy {
  public:
    using Args = std::vector<std::string>;
    using Pred = std::function<bool(const Args &)>;

    Proxy(const std::string &upstream_host, int upstream_port);
    ~Proxy();
    Proxy(const Proxy &) = delete;
    Proxy &operator=(const Proxy &) = delete;

    int port() const;
    std::string url() const; /* redis://127.0.0.1:<port> */

    void drop_reply_of_next(Pred pred, std::function<void()> on_drop = {});
    void drop_next_request(Pred pred);
    void drop_requests(Pred pred);
    void stall_requests(Pred pred, const std::string &spared = "");
    void reset_connections(int n);
    /* Connections reset so far by reset_connections(). */
    int resets() const;
    void disarm();

    int dropped_replies() const;
    int dropped_requests() const;
    /* The bytes of the last reply that was not forwarded. */
    std::string last_dropped_reply() const;
    /* How many requests seen so far match pred. */
    int count(const Pred &pred) const;
    /* Close every connection now (both sides). */
    void close_all();

    /* Predicates. */
    static bool is_eval(const Args &a); /* EVAL or EVALSHA, any case */
    static bool mentions(const Args &a, const std::string &s); /* some argument contains s */

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace rmt

#endif
