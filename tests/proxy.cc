/* proxy.cc -- see proxy.h.  One poll() loop; writes are blocking (loopback,
 * small messages). */
#include "proxy.h"

#include <strings.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace rmt {

namespace {

int connect_to(const std::string &host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

/* Parse one request from buf.  Returns its length in bytes (0: incomplete)
 * and fills args. */
size_t parse_request(const std::string &buf, Proxy::Args *args)
{
    args->clear();
    if (buf.empty())
        return 0;
    if (buf[0] != '*') { /* inline command */
        auto e = buf.find("\r\n");
        if (e == std::string::npos)
            return 0;
        std::string line = buf.substr(0, e);
        size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && line[i] == ' ')
                i++;
            size_t j = line.find(' ', i);
            if (j == std::string::npos)
                j = line.size();
            if (j > i)
                args->push_back(line.substr(i, j - i));
            i = j;
        }
        return e + 2;
    }
    auto e = buf.find("\r\n");
    if (e == std::string::npos)
        return 0;
    long n = strtol(buf.c_str() + 1, nullptr, 10);
    size_t pos = e + 2;
    for (long k = 0; k < n; k++) {
        if (pos >= buf.size() || buf[pos] != '$')
            return 0;
        auto le = buf.find("\r\n", pos);
        if (le == std::string::npos)
            return 0;
        long len = strtol(buf.c_str() + pos + 1, nullptr, 10);
        pos = le + 2;
        if (buf.size() < pos + static_cast<size_t>(len) + 2)
            return 0;
        args->push_back(buf.substr(pos, static_cast<size_t>(len)));
        pos += static_cast<size_t>(len) + 2;
    }
    return pos;
}

} // namespace

struct Proxy::Impl {
    struct Conn {
        int client = -1, server = -1;
        std::string pending; /* client bytes not yet parsed into whole requests */
        bool doomed = false; /* close instead of forwarding the next reply */
        bool reset = false;  /* reset at the client's first bytes */
        std::string name;    /* what CLIENT SETNAME named it */
        std::function<void()> on_drop;
    };

    std::string host;
    int upstream_port = 0;
    int listen_fd = -1;
    int port = 0;
    int wake[2] = {-1, -1};
    std::thread loop;

    mutable std::mutex mu;
    bool stopping = false;
    bool close_all_requested = false;
    Pred reply_pred, request_pred;
    bool request_pred_stays = false; /* drop_requests(): until disarm() */
    bool request_swallow = false;    /* stall_requests(): no close, no reply */
    std::string spared;              /* ... but not on connections named so */
    std::function<void()> reply_hook;
    int dropped_replies = 0, dropped_requests = 0;
    int resets_left = 0, resets_done = 0; /* reset_connections() */
    std::string last_dropped;
    std::vector<Args> seen;

    std::list<Conn> conns; /* proxy thread only */

    void run();
    void close_conn(Conn &c)
    {
        if (c.client >= 0)
            close(c.client);
        if (c.server >= 0)
            close(c.server);
        c.client = c.server = -1;
    }
    /* Returns false when the connection is to be closed. */
    bool from_client(Conn &c);
    bool from_server(Conn &c);
};

Proxy::Proxy(const std::string &upstream_host, int upstream_port) : impl_(new Impl)
{
    impl_->host = upstream_host;
    impl_->upstream_port = upstream_port;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || listen(fd, 64) != 0)
        throw std::runtime_error("proxy: bind/listen failed");
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    impl_->listen_fd = fd;
    impl_->port = ntohs(a.sin_port);
    if (pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        throw std::runtime_error("proxy: pipe failed");
    impl_->loop = std::thread([this] { impl_->run(); });
}

Proxy::~Proxy()
{
    {
        std::lock_guard<std::mutex> g(impl_->mu);
        impl_->stopping = true;
    }
    char b = 1;
    (void)!write(impl_->wake[1], &b, 1);
    impl_->loop.join();
    for (auto &c : impl_->conns)
        impl_->close_conn(c);
    close(impl_->listen_fd);
    close(impl_->wake[0]);
    close(impl_->wake[1]);
}

int Proxy::port() const { return impl_->port; }
std::string Proxy::url() const { return "redis://127.0.0.1:" + std::to_string(impl_->port); }

void Proxy::drop_reply_of_next(Pred pred, std::function<void()> on_drop)
{
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->reply_pred = std::move(pred);
    impl_->reply_hook = std::move(on_drop);
}

void Proxy::drop_next_request(Pred pred)
{
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->request_pred = std::move(pred);
    impl_->request_pred_stays = false;
}

void Proxy::drop_requests(Pred pred)
{
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->request_pred = std::move(pred);
    impl_->request_pred_stays = true;
    impl_->request_swallow = false;
}

void Proxy::stall_requests(Pred pred, const std::string &spared)
{
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->request_pred = std::move(pred);
    impl_->request_pred_stays = true;
    impl_->request_swallow = true;
    impl_->spared = spared;
}

void Proxy::reset_connections(int n)
{
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->resets_left = n;
}

int Proxy::resets() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->resets_done;
}

void Proxy::disarm()
{
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->reply_pred = nullptr;
    impl_->reply_hook = nullptr;
    impl_->request_pred = nullptr;
    impl_->request_swallow = false;
}

int Proxy::dropped_replies() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->dropped_replies;
}

int Proxy::dropped_requests() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->dropped_requests;
}

std::string Proxy::last_dropped_reply() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->last_dropped;
}

int Proxy::count(const Pred &pred) const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return static_cast<int>(std::count_if(impl_->seen.begin(), impl_->seen.end(), pred));
}

void Proxy::close_all()
{
    {
        std::lock_guard<std::mutex> g(impl_->mu);
        impl_->close_all_requested = true;
    }
    char b = 1;
    (void)!write(impl_->wake[1], &b, 1);
}

bool Proxy::is_eval(const Args &a)
{
    if (a.empty())
        return false;
    std::string c = a[0];
    std::transform(c.begin(), c.end(), c.begin(), ::toupper);
    return c == "EVAL" || c == "EVALSHA" || c == "EVAL_RO" || c == "EVALSHA_RO" || c == "FCALL";
}

bool Proxy::mentions(const Args &a, const std::string &s)
{
    for (auto &x : a)
        if (x.find(s) != std::string::npos)
            return true;
    return false;
}

bool Proxy::Impl::from_client(Conn &c)
{
    char buf[16384];
    ssize_t n = recv(c.client, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    if (c.reset) { /* RST, with the bytes unread: no reply, no FIN */
        struct linger hard = {1, 0};
        setsockopt(c.client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        std::lock_guard<std::mutex> g(mu);
        resets_done++;
        return false;
    }
    c.pending.append(buf, static_cast<size_t>(n));
    std::string forward;
    for (;;) {
        Args args;
        size_t len = parse_request(c.pending, &args);
        if (len == 0)
            break;
        {
            std::lock_guard<std::mutex> g(mu);
            if (seen.size() < 100000)
                seen.push_back(args);
            if (args.size() == 3 && strcasecmp(args[0].c_str(), "CLIENT") == 0 &&
                strcasecmp(args[1].c_str(), "SETNAME") == 0)
                c.name = args[2];
            bool spare = request_swallow && !spared.empty() && c.name.compare(0, spared.size(), spared) == 0;
            if (request_pred && !spare && request_pred(args)) {
                if (!request_pred_stays)
                    request_pred = nullptr;
                dropped_requests++;
                if (request_swallow) { /* never answered; the connection stays */
                    c.pending.erase(0, len);
                    continue;
                }
                /* Whatever came before it in this read still goes through. */
                if (!forward.empty())
                    send_all(c.server, forward.data(), forward.size());
                return false;
            }
            if (reply_pred && reply_pred(args)) {
                reply_pred = nullptr;
                c.doomed = true;
                c.on_drop = std::move(reply_hook);
                reply_hook = nullptr;
            }
        }
        forward.append(c.pending, 0, len);
        c.pending.erase(0, len);
    }
    return forward.empty() || send_all(c.server, forward.data(), forward.size());
}

bool Proxy::Impl::from_server(Conn &c)
{
    char buf[16384];
    ssize_t n = recv(c.server, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    if (c.doomed) {
        /* The hook runs first, so that whoever sees the drop counted also
         * sees what the hook did (through mu). */
        if (c.on_drop)
            c.on_drop();
        std::lock_guard<std::mutex> g(mu);
        dropped_replies++;
        last_dropped.assign(buf, static_cast<size_t>(n));
        return false;
    }
    return send_all(c.client, buf, static_cast<size_t>(n));
}

void Proxy::Impl::run()
{
    for (;;) {
        {
            std::lock_guard<std::mutex> g(mu);
            if (stopping)
                return;
            if (close_all_requested) {
                close_all_requested = false;
                for (auto &c : conns)
                    close_conn(c);
                conns.clear();
            }
        }
        std::vector<struct pollfd> fds;
        fds.push_back({wake[0], POLLIN, 0});
        fds.push_back({listen_fd, POLLIN, 0});
        for (auto &c : conns) {
            fds.push_back({c.client, POLLIN, 0});
            fds.push_back({c.server, POLLIN, 0});
        }
        int n = poll(fds.data(), fds.size(), 1000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        if (fds[0].revents) {
            char b[64];
            while (read(wake[0], b, sizeof b) > 0) {
            }
        }
        size_t i = 2;
        for (auto it = conns.begin(); it != conns.end(); i += 2) {
            bool keep = true;
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
                keep = from_client(*it);
            if (keep && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                keep = from_server(*it);
            if (!keep) {
                close_conn(*it);
                it = conns.erase(it);
            } else {
                ++it;
            }
        }
        if (fds[1].revents & POLLIN) {
            int cfd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (cfd >= 0) {
                int sfd = connect_to(host, upstream_port);
                if (sfd < 0) {
                    close(cfd);
                } else {
                    int one = 1;
                    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    Conn c;
                    c.client = cfd;
                    c.server = sfd;
                    std::lock_guard<std::mutex> g(mu);
                    if (resets_left > 0) {
                        resets_left--;
                        c.reset = true;
                    }
                    conns.push_back(std::move(c));
                }
            }
        }
    }
}

} // namespace rmt
