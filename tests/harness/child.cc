/* child.cc -- the other processes of a test.  See child.h. */
#include "child.h"
#include "build.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char **environ;

#ifndef RMUTEX_TEST_CHILD
#error "RMUTEX_TEST_CHILD must name the rmutex_test_child binary"
#endif

namespace rmt {

Child::Child(const std::vector<std::string> &args, const std::string &url,
             const std::vector<std::string> &extra_env)
    : Child(RMUTEX_TEST_CHILD, args, url, extra_env)
{
}

Child::Child(const std::string &program, const std::vector<std::string> &args,
             const std::string &url, const std::vector<std::string> &extra_env)
{
    /* The environment: ours, minus what RMUTEX_URL and extra_env replace. */
    auto replaced = [&](const char *e) {
        if (strncmp(e, "RMUTEX_URL=", 11) == 0)
            return true;
        for (auto &x : extra_env) {
            size_t eq = x.find('=');
            if (eq != std::string::npos && strncmp(e, x.c_str(), eq + 1) == 0)
                return true;
        }
        return false;
    };
    std::vector<std::string> env;
    for (char **e = environ; *e; e++)
        if (!replaced(*e))
            env.push_back(*e);
    env.push_back("RMUTEX_URL=" + url);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<std::string> all = {program};
    all.insert(all.end(), args.begin(), args.end());
    spawn(all, env, false);
}

Child::Child(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env)
{
    std::vector<std::string> envs;
    for (char **e = environ; *e; e++) {
        std::string kv(*e);
        std::string k = kv.substr(0, kv.find('='));
        if (k == "LD_PRELOAD" || k == "RMUTEX_PRELOAD" || k == "RMUTEX_URL" || env.count(k))
            continue;
        envs.push_back(kv);
    }
    for (const auto &[k, v] : env)
        if (!v.empty())
            envs.push_back(k + "=" + v);
    spawn(argv, envs, true);
}

void Child::spawn(const std::vector<std::string> &all, const std::vector<std::string> &env,
                  bool capture_stderr)
{
    int errfd = -1;
    if (capture_stderr) {
        char tmpl[] = "/tmp/rmutex-child-stderr.XXXXXX";
        if ((errfd = mkstemp(tmpl)) < 0) {
            ADD_FAILURE() << "mkstemp: " << strerror(errno);
            return;
        }
        err_path_ = tmpl;
    }
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe: " << strerror(errno);
        if (errfd >= 0)
            close(errfd);
        return;
    }
    std::vector<char *> argv, envp;
    for (auto &a : all)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (auto &e : env)
        envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    if (errfd >= 0)
        posix_spawn_file_actions_adddup2(&fa, errfd, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);
    if (errfd >= 0)
        close(errfd);
    in_ = to_child[1];
    out_ = from_child[0];
    if (rc != 0) {
        ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << strerror(rc);
        return;
    }
    pid_ = pid;
}

Child::~Child()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status;
        waitpid(pid_, &status, 0);
    }
    if (in_ >= 0)
        close(in_);
    if (out_ >= 0)
        close(out_);
    if (!err_path_.empty())
        unlink(err_path_.c_str());
}

std::optional<std::string> Child::read_line(ms bound) { return read_line_unscaled(scaled(bound)); }

std::optional<std::string> Child::read_line_unscaled(ms bound)
{
    auto end = Clock::now() + bound;
    for (;;) {
        auto nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            log_.push_back(line);
            return line;
        }
        if (out_ < 0)
            return std::nullopt;
        /* A bound already passed still looks once at what has arrived. */
        auto left = std::max<int64_t>(0, std::chrono::duration_cast<ms>(end - Clock::now()).count());
        struct pollfd p = {out_, POLLIN, 0};
        int n = poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::nullopt;
        char chunk[4096];
        ssize_t got = read(out_, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return std::nullopt;
        buf_.append(chunk, static_cast<size_t>(got));
    }
}

std::optional<std::string> Child::expect_line(const std::string &prefix, ms bound)
{
    auto end = Clock::now() + scaled(bound);
    for (;;) {
        auto left = std::chrono::duration_cast<ms>(end - Clock::now());
        if (left.count() < 0)
            left = ms(0);
        auto line = read_line_unscaled(left);
        if (!line)
            return std::nullopt;
        if (line->compare(0, prefix.size(), prefix) == 0)
            return line;
        fprintf(stderr, "[child %d] %s\n", static_cast<int>(pid_), line->c_str());
    }
}

bool Child::write_line(const std::string &line)
{
    std::string s = line + "\n";
    return write(in_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

void Child::kill(int sig)
{
    if (pid_ > 0)
        ::kill(pid_, sig);
}

int Child::wait(ms bound)
{
    if (pid_ <= 0)
        return reaped_ ? status_ : -1;
    auto end = Clock::now() + scaled(bound);
    int status;
    for (;;) {
        pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            reaped_ = true;
            status_ = status;
            return status;
        }
        if (Clock::now() >= end)
            return -1;
        std::this_thread::sleep_for(ms(5));
    }
}

std::string Child::err() const { return read_file(err_path_); }

std::vector<std::string> lines(const std::string &s)
{
    std::vector<std::string> v;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l))
        if (!l.empty())
            v.push_back(l);
    return v;
}

std::string shell(const std::string &cmd, int *status)
{
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p)
        return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    int st = pclose(p);
    if (status)
        *status = st;
    return out;
}

std::unique_ptr<Child> child_holding(const std::string &name, const std::string &url,
                                     const std::vector<std::string> &opts, int expect_rc)
{
    std::vector<std::string> args = {"hold", name};
    args.insert(args.end(), opts.begin(), opts.end());
    auto c = std::make_unique<Child>(args, url);
    auto line = c->expect_line("held", ms(15000));
    if (!line) {
        ADD_FAILURE() << "the child did not report holding " << name;
        return nullptr;
    }
    if (field(*line, "rc") != std::to_string(expect_rc)) {
        ADD_FAILURE() << "the child's lock of " << name << " returned: " << *line;
        return nullptr;
    }
    return c;
}

std::vector<std::string> words(const std::string &line)
{
    std::vector<std::string> w;
    std::istringstream in(line);
    std::string s;
    while (in >> s)
        w.push_back(s);
    return w;
}

int run_to_end(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env,
               std::string *out, ms bound)
{
    Child c(argv, env);
    std::string o;
    while (auto l = c.read_line(bound)) o += *l + "\n";
    int st = c.wait(bound);
    if (out) *out = o;
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string field(const std::string &line, const std::string &key)
{
    for (auto &w : words(line))
        if (w.compare(0, key.size() + 1, key + "=") == 0)
            return w.substr(key.size() + 1);
    return "";
}

std::optional<int> wait_exit(pid_t pid, ms bound)
{
    int status = -1;
    if (wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; }, bound))
        return status;
    ::kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return std::nullopt;
}

std::map<std::string, char> exported_symbols(const std::string &lib)
{
    int st = 0;
    std::string out = shell("nm -D --defined-only '" + lib + "'", &st);
    std::map<std::string, char> syms;
    if (st != 0) {
        ADD_FAILURE() << "nm -D " << lib << ": " << out;
        return syms;
    }
    for (const auto &l : lines(out)) {
        auto w = words(l); /* value, type, name */
        if (w.size() == 3 && w[1].size() == 1) syms[w[2]] = w[1][0];
    }
    return syms;
}

std::string read_file(const std::string &path)
{
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

TempDir::TempDir(const std::string &prefix)
{
    std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
    if (mkdtemp(tmpl.data()))
        path = tmpl;
    else
        ADD_FAILURE() << "mkdtemp " << tmpl << ": " << strerror(errno);
}

TempDir::~TempDir()
{
    if (!path.empty())
        std::filesystem::remove_all(path);
}

} // namespace rmt
