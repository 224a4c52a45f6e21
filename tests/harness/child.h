/* child.h -- the other processes of a test, and what they leave in files
 * (part of harness.h).
 *
 * Child spawns the rmutex_test_child helper (tests/child.cc) or any other
 * program with RMUTEX_URL in its environment and talks to it line by line
 * over its stdin and stdout; the programs under test (the preload shim's,
 * the header swap's, the command's) get a clean environment of their own
 * and their stderr kept for err().  A forked copy of the test program is
 * reaped with wait_exit(); shell() runs a command line; TempDir is a
 * directory of the test's own. */
#ifndef RMUTEX_TEST_HARNESS_CHILD_H
#define RMUTEX_TEST_HARNESS_CHILD_H

#include "timing.h"

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rmt {

class Child {
  public:
    /* Spawn rmutex_test_child with args; RMUTEX_URL=url in its environment
     * (plus extra_env "K=V" entries, which replace inherited ones). */
    Child(const std::vector<std::string> &args, const std::string &url,
          const std::vector<std::string> &extra_env = {});
    /* The same with another helper program. */
    Child(const std::string &program, const std::vector<std::string> &args,
          const std::string &url, const std::vector<std::string> &extra_env = {});
    /* Any program (argv[0] is its path), with this process's environment
     * minus LD_PRELOAD, RMUTEX_PRELOAD and RMUTEX_URL, plus env (a value ""
     * unsets); its stderr is kept in a file for err().  For programs under
     * test, such as the preload shim's and the header swap's. */
    Child(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env);
    ~Child();
    Child(const Child &) = delete;
    Child &operator=(const Child &) = delete;

    pid_t pid() const { return pid_; }
    /* The next line on the child's stdout (without the newline), or nothing
     * when scaled(bound) passed or the child closed stdout. */
    std::optional<std::string> read_line(ms bound);
    std::optional<std::string> read_line_unscaled(ms bound);
    /* A complete line already received or arriving within bound (unscaled),
     * without waiting longer: for "has it said anything yet?". */
    std::optional<std::string> poll_line(ms bound = ms(0)) { return read_line_unscaled(bound); }
    /* Read lines until one starts with prefix; returns it. */
    std::optional<std::string> expect_line(const std::string &prefix, ms bound);
    bool write_line(const std::string &line);
    void kill(int sig);
    /* Wait for exit within scaled(bound).  Returns the wait status, or -1. */
    int wait(ms bound);
    bool exited() const { return pid_ < 0; }
    /* It was spawned (and may have exited since). */
    bool started() const { return pid_ > 0 || reaped_; }
    /* Everything it wrote to stderr so far (the env constructor only). */
    std::string err() const;
    /* The stdout lines read so far. */
    const std::vector<std::string> &log() const { return log_; }

  private:
    void spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env,
               bool capture_stderr);

    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = -1;
    int in_ = -1, out_ = -1;
    std::string buf_, err_path_;
    std::vector<std::string> log_;
};

/* Spawn "rmutex_test_child hold name opts..." and wait until it prints
 * "held rc=<expect_rc>".  nullptr (and a test failure) otherwise. */
std::unique_ptr<Child> child_holding(const std::string &name, const std::string &url,
                                     const std::vector<std::string> &opts = {}, int expect_rc = 0);

/* Reap pid (a forked child) within scaled(bound), or kill -9 and reap it
 * after that.  Its wait status if it exited in time, else nothing. */
std::optional<int> wait_exit(pid_t pid, ms bound);

/* Lines of s (without newlines, empty lines dropped). */
std::vector<std::string> lines(const std::string &s);

/* The words of a line: "held 0 17" -> {"held", "0", "17"}. */
std::vector<std::string> words(const std::string &line);
/* "key=value" lookup among words; "" if missing. */
std::string field(const std::string &line, const std::string &key);

/* Run argv (argv[0] its path; env as Child's env constructor takes it) to
 * its end, within scaled(bound): its exit code (-1 if it did not exit),
 * its stdout into *out (may be NULL). */
int run_to_end(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env,
               std::string *out = nullptr, ms bound = ms(20000));

/* Run a command through /bin/sh and return its stdout. */
std::string shell(const std::string &cmd, int *status = nullptr);

/* The symbols a shared library exports, as `nm -D --defined-only` lists
 * them, with nm's letter for each ('T' code, 'D' or 'B' data, 'A' the
 * linker's version nodes).  Empty, and a test failure, if nm fails. */
std::map<std::string, char> exported_symbols(const std::string &lib);

/* The whole content of a file ("" if it cannot be read). */
std::string read_file(const std::string &path);

/* A directory of the test's own (mkdtemp under /tmp), removed with
 * everything in it at the end of its scope.  path is "" (and the test has
 * failed) if it could not be made. */
struct TempDir {
    explicit TempDir(const std::string &prefix = "rmutex-test");
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    std::string operator/(const std::string &file) const { return path + "/" + file; }
    std::string path;
};

} // namespace rmt

#endif
