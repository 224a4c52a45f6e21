/* proc.h -- run a test program in a process of its own, with a chosen
 * environment, talk to it line by line over stdin/stdout, and collect its
 * stderr in a file (the shim's only output goes there). */
#ifndef RMUTEX_SHIM_TEST_PROC_H
#define RMUTEX_SHIM_TEST_PROC_H

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shimt {

using ms = std::chrono::milliseconds;

class Proc {
  public:
    /* Spawn argv with this process's environment, minus LD_PRELOAD,
     * RMUTEX_PRELOAD and RMUTEX_URL, plus env (a value "" unsets). */
    Proc(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env);
    ~Proc();
    Proc(const Proc &) = delete;
    Proc &operator=(const Proc &) = delete;

    bool started() const { return pid_ > 0 || status_ >= 0; }
    /* The next stdout line within scaled(bound), or nothing. */
    std::optional<std::string> read_line(ms bound);
    /* Lines until one starts with prefix (others are kept in log()). */
    std::optional<std::string> expect(const std::string &prefix, ms bound);
    bool write_line(const std::string &s);
    /* Wait for exit within scaled(bound): the wait status, or -1. */
    int wait(ms bound);
    /* Everything written to stderr so far. */
    std::string err() const;
    /* The stdout lines read so far. */
    const std::vector<std::string> &log() const { return log_; }

  private:
    pid_t pid_ = -1;
    int status_ = -1;
    int in_ = -1, out_ = -1;
    std::string buf_, err_path_;
    std::vector<std::string> log_;
};

/* Lines of s (without newlines, empty lines dropped). */
std::vector<std::string> lines(const std::string &s);

/* Run a command through /bin/sh and return its stdout. */
std::string shell(const std::string &cmd, int *status = nullptr);

} // namespace shimt

#endif
