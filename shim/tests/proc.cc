/* proc.cc -- see proc.h. */
#include "proc.h"

#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char **environ;

namespace shimt {

Proc::Proc(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env)
{
    std::vector<std::string> envs;
    for (char **e = environ; *e; e++) {
        std::string kv(*e);
        std::string k = kv.substr(0, kv.find('='));
        if (k == "LD_PRELOAD" || k == "RMUTEX_PRELOAD" || k == "RMUTEX_URL" || env.count(k)) continue;
        envs.push_back(kv);
    }
    for (const auto &[k, v] : env)
        if (!v.empty()) envs.push_back(k + "=" + v);

    char tmpl[] = "/tmp/rmutex-shim-stderr.XXXXXX";
    int errfd = mkstemp(tmpl);
    if (errfd < 0) return;
    err_path_ = tmpl;

    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
        close(errfd);
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errfd, 2);
    std::vector<char *> av, ev;
    for (const auto &a : argv) av.push_back(const_cast<char *>(a.c_str()));
    av.push_back(nullptr);
    for (const auto &e : envs) ev.push_back(const_cast<char *>(e.c_str()));
    ev.push_back(nullptr);
    pid_t pid;
    int r = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), ev.data());
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    close(errfd);
    if (r) {
        close(in[1]);
        close(out[0]);
        return;
    }
    pid_ = pid;
    in_ = in[1];
    out_ = out[0];
}

Proc::~Proc()
{
    if (pid_ > 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    if (!err_path_.empty()) unlink(err_path_.c_str());
}

std::optional<std::string> Proc::read_line(ms bound)
{
    auto deadline = rmt::Clock::now() + rmt::scaled(bound);
    for (;;) {
        size_t nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            log_.push_back(line);
            return line;
        }
        if (out_ < 0) return std::nullopt;
        auto left = std::chrono::duration_cast<ms>(deadline - rmt::Clock::now()).count();
        if (left <= 0) return std::nullopt;
        struct pollfd p = { out_, POLLIN, 0 };
        int r = poll(&p, 1, static_cast<int>(left));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return std::nullopt;
        char tmp[4096];
        ssize_t n = read(out_, tmp, sizeof tmp);
        if (n <= 0) {
            close(out_);
            out_ = -1;
            continue;
        }
        buf_.append(tmp, static_cast<size_t>(n));
    }
}

std::optional<std::string> Proc::expect(const std::string &prefix, ms bound)
{
    auto deadline = rmt::Clock::now() + rmt::scaled(bound);
    for (;;) {
        auto left = std::chrono::duration_cast<ms>(deadline - rmt::Clock::now());
        if (left.count() <= 0) return std::nullopt;
        /* read_line scales again: hand it the unscaled remainder. */
        auto line = read_line(ms(static_cast<int64_t>(static_cast<double>(left.count()) /
                                                        rmt::time_scale()) + 1));
        if (!line) return std::nullopt;
        if (line->compare(0, prefix.size(), prefix) == 0) return line;
    }
}

bool Proc::write_line(const std::string &s)
{
    std::string l = s + "\n";
    return in_ >= 0 && write(in_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
}

int Proc::wait(ms bound)
{
    if (pid_ <= 0) return status_;
    bool done = rmt::wait_until(
        [&] {
            int st;
            pid_t r = waitpid(pid_, &st, WNOHANG);
            if (r == pid_) {
                status_ = st;
                pid_ = -1;
                return true;
            }
            return false;
        },
        bound);
    return done ? status_ : -1;
}

std::string Proc::err() const
{
    std::ifstream f(err_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<std::string> lines(const std::string &s)
{
    std::vector<std::string> v;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l))
        if (!l.empty()) v.push_back(l);
    return v;
}

std::string shell(const std::string &cmd, int *status)
{
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    if (status) *status = st;
    return out;
}

} // namespace shimt
