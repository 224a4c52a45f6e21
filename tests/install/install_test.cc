/* install_test.cc -- rmutex as a user meets it: installed with
 * `cmake --install` to a prefix of the test's own, then used from outside
 * the source tree as the documentation says.
 *
 *   DocSnippets: every ```c block of README.md and of the pages of docs/
 *   compiles, as a translation unit of its own, against the installed
 *   headers alone (and links against the installed libraries when it has a
 *   main()).  A block
 *   that is deliberately a fragment has the line "<!-- fragment: WHY -->"
 *   right before its fence and is left out (docs/testing.md).
 *
 *   InstalledPrefix: the README's hello.c, built with the README's own
 *   pkg-config line and with its own three CMake lines (find_package), runs
 *   against a redis-server and finds librmutex.so.0 in the prefix by
 *   itself: no LD_LIBRARY_PATH, no ldconfig.  So does the installed rmutex
 *   command, and a program built with the header swap's own .pc file.
 *
 * Each test installs afresh (a fraction of a second), so nothing stale
 * from an earlier run can make it pass. */
#include "harness.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace rmt;

namespace {

namespace fs = std::filesystem;

const std::string kSource = RMUTEX_TEST_SOURCE_DIR;
const std::string kBuild = RMUTEX_TEST_BUILD_DIR;

std::string slurp(const std::string &path)
{
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

void spit(const std::string &path, const std::string &text)
{
    std::ofstream f(path);
    f << text;
}

std::string sh_quote(const std::string &s)
{
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

/* A command through /bin/sh, stderr with stdout.  Exit status, or -1. */
int run(const std::string &cmd, std::string *out)
{
    int st = -1;
    *out = shell(cmd + " 2>&1", &st);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One fenced code block of a Markdown file. */
struct Block {
    std::string file;     /* relative to the source tree */
    int line = 0;         /* of the opening fence */
    std::string lang;     /* the info string's first word */
    std::string text;
    std::string fragment; /* the reason, when marked as a fragment */
};

std::string trim(const std::string &s)
{
    size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

/* The fenced blocks of a Markdown file, indented ones (in list items)
 * included, their indentation removed. */
std::vector<Block> blocks_of(const std::string &rel)
{
    std::vector<Block> out;
    std::istringstream in(slurp(kSource + "/" + rel));
    std::string l, prev;
    Block *cur = nullptr;
    size_t indent = 0;
    for (int n = 1; std::getline(in, l); n++) {
        std::string t = trim(l);
        if (!cur && t.rfind("```", 0) == 0) {
            out.push_back(Block{});
            cur = &out.back();
            cur->file = rel;
            cur->line = n;
            std::string info = trim(t.substr(3));
            cur->lang = info.substr(0, info.find(' '));
            indent = l.find("```");
            const std::string mark = "<!-- fragment:";
            std::string p = trim(prev);
            if (p.rfind(mark, 0) == 0 && p.size() > mark.size() + 4)
                cur->fragment = trim(p.substr(mark.size(), p.size() - mark.size() - 3));
        } else if (cur && t == "```") {
            cur = nullptr;
        } else if (cur) {
            cur->text += (l.size() >= indent ? l.substr(indent) : trim(l)) + "\n";
        }
        prev = l;
    }
    return out;
}

/* README.md and every page of docs/. */
std::vector<Block> doc_blocks()
{
    std::vector<std::string> files{ "README.md" };
    for (auto &e : fs::directory_iterator(kSource + "/docs"))
        if (e.path().extension() == ".md") files.push_back("docs/" + e.path().filename().string());
    std::sort(files.begin() + 1, files.end());
    std::vector<Block> all;
    for (auto &f : files)
        for (auto &b : blocks_of(f)) all.push_back(b);
    return all;
}

/* A scratch directory with this build installed in DIR/prefix. */
class Install {
  public:
    Install()
    {
        char tmpl[] = "/tmp/rmutex-install-test.XXXXXX";
        if (!mkdtemp(tmpl)) {
            ADD_FAILURE() << "mkdtemp: " << strerror(errno);
            return;
        }
        dir_ = tmpl;
        prefix_ = dir_ + "/prefix";
        std::string out;
        int rc = run(sh_quote(RMUTEX_TEST_CMAKE) + " --install " + sh_quote(kBuild) + " --prefix " +
                         sh_quote(prefix_),
                     &out);
        ok_ = rc == 0;
        if (!ok_) ADD_FAILURE() << "cmake --install failed (" << rc << "):\n" << out;
    }
    ~Install()
    {
        if (!dir_.empty()) shell("rm -rf " + sh_quote(dir_));
    }
    bool ok() const { return ok_; }
    const std::string &dir() const { return dir_; }
    const std::string &prefix() const { return prefix_; }
    std::string libdir() const { return prefix_ + "/" + RMUTEX_TEST_LIBDIR; }
    std::string includedir() const { return prefix_ + "/" + RMUTEX_TEST_INCLUDEDIR; }
    std::string bindir() const { return prefix_ + "/" + RMUTEX_TEST_BINDIR; }

  private:
    std::string dir_, prefix_;
    bool ok_ = false;
};

/* ---- every C snippet of the documentation ------------------------------ */

TEST(DocSnippets, EveryCSnippetCompilesAgainstTheInstalledHeaders)
{
    Install in;
    ASSERT_TRUE(in.ok());
    int compiled = 0, linked = 0;
    for (const Block &b : doc_blocks()) {
        if (b.lang != "c") continue;
        std::string where = b.file + ":" + std::to_string(b.line);
        if (!b.fragment.empty()) {
            std::cout << "[ fragment ] " << where << ": " << b.fragment << "\n";
            continue;
        }
        std::string base = in.dir() + "/snippet" + std::to_string(compiled);
        spit(base + ".c", b.text);
        /* The installed headers alone: no -I for hiredis, no build tree. */
        std::string out;
        int rc = run(sh_quote(RMUTEX_TEST_CC) + " -Wall -Wextra -Werror -I" +
                         sh_quote(in.includedir()) + " -c " + sh_quote(base + ".c") + " -o " +
                         sh_quote(base + ".o"),
                     &out);
        EXPECT_EQ(0, rc) << where << " does not compile against the installed headers:\n"
                         << b.text << "\n" << out;
        compiled++;
        if (rc != 0 || b.text.find("main(") == std::string::npos) continue;
        rc = run(sh_quote(RMUTEX_TEST_CC) + " " + sh_quote(base + ".o") + " -o " + sh_quote(base) +
                     " -L" + sh_quote(in.libdir()) + " -lrmutex_pthread -lrmutex -pthread",
                 &out);
        EXPECT_EQ(0, rc) << where << " does not link against the installed libraries:\n" << out;
        linked++;
    }
    /* The extraction itself works: the README alone has several, one a
     * program (hello.c). */
    EXPECT_GE(compiled, 5) << "too few ```c blocks found: is the extraction broken?";
    EXPECT_GE(linked, 1);
}

/* ---- out of tree, against the prefix ------------------------------------ */

class InstalledPrefix : public RedisTest {
  protected:
    void SetUp() override
    {
        RedisTest::SetUp();
        in_ = std::make_unique<Install>();
        ASSERT_TRUE(in_->ok());
    }
    const Install &in() const { return *in_; }
    std::unique_ptr<Install> in_;

    /* The README's block of this language whose text contains marker. */
    static std::string readme_block(const std::string &lang, const std::string &marker)
    {
        for (const Block &b : blocks_of("README.md"))
            if (b.lang == lang && b.text.find(marker) != std::string::npos) return b.text;
        ADD_FAILURE() << "README.md has no ```" << lang << " block with \"" << marker << "\"";
        return "";
    }
    /* The README's line that contains marker (in any block). */
    static std::string readme_line(const std::string &marker)
    {
        for (const Block &b : blocks_of("README.md")) {
            std::istringstream in(b.text);
            for (std::string l; std::getline(in, l);)
                if (l.find(marker) != std::string::npos) return l;
        }
        ADD_FAILURE() << "README.md has no line with \"" << marker << "\"";
        return "";
    }

    std::string pkg_config_env() const
    {
        return "export PKG_CONFIG_PATH=" + sh_quote(in().libdir() + "/pkgconfig") + "; ";
    }

    /* exe's librmutex.so.0 comes from the prefix (ldd says where the
     * loader finds it: "librmutex.so.0 => /p/bin/../lib/librmutex.so.0"). */
    void expect_loads_from_prefix(const std::string &exe) const
    {
        std::string out, found;
        run("env -u LD_LIBRARY_PATH ldd " + sh_quote(exe), &out);
        const std::string key = "librmutex.so.0 => ";
        size_t at = out.find(key);
        if (at != std::string::npos) {
            found = out.substr(at + key.size());
            found = found.substr(0, found.find_first_of(" \n"));
        }
        std::error_code ec;
        EXPECT_TRUE(!found.empty() &&
                    fs::equivalent(found, in().libdir() + "/librmutex.so.0", ec))
            << exe << " does not load the installed librmutex.so.0:\n" << out;
    }

    /* Run a program built against the prefix, as a user would (no
     * LD_LIBRARY_PATH), with RMUTEX_URL set: {exit code, stdout+stderr}. */
    std::pair<int, std::string> run_program(const std::vector<std::string> &argv)
    {
        Child c(argv, { { "RMUTEX_URL", url() }, { "LD_LIBRARY_PATH", "" } });
        std::string out;
        while (auto l = c.read_line(ms(20000))) out += *l + "\n";
        int st = c.wait(ms(20000));
        out += c.err();
        return { st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, out };
    }

    /* argv prints "held ..." once it holds the lock name, then waits for a
     * line on stdin: the lock is held in Redis meanwhile, and free after it
     * exits 0.  Returns what it printed first. */
    std::string expect_holds_while_running(const std::vector<std::string> &argv,
                                           const std::string &name)
    {
        Child c(argv, { { "RMUTEX_URL", url() }, { "LD_LIBRARY_PATH", "" } });
        auto l = c.expect_line("held", ms(10000));
        EXPECT_TRUE(l) << argv[0] << " never said it holds the lock: " << c.err();
        if (!l) return "";
        EXPECT_TRUE(redis().exists(name)) << argv[0] << " runs, but the lock is not held in Redis";
        c.write_line("");
        int st = c.wait(ms(10000));
        EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) << c.err();
        EXPECT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(5000)));
        return *l;
    }

    /* hello.c from the README, in a directory of its own. */
    std::string hello_dir(const std::string &name)
    {
        std::string d = in().dir() + "/" + name;
        mkdir(d.c_str(), 0755);
        spit(d + "/hello.c", readme_block("c", "/* hello.c"));
        return d;
    }

    void expect_hello_runs(const std::string &exe)
    {
        expect_loads_from_prefix(exe);
        auto [rc, out] = run_program({ exe });
        EXPECT_EQ(0, rc) << out;
        EXPECT_NE(std::string::npos, out.find("holds the lock")) << out;
        EXPECT_EQ(std::string::npos, out.find("cannot open shared object")) << out;
    }
};

TEST_F(InstalledPrefix, HelloBuiltWithTheReadmesPkgConfigLineRunsWithoutLdLibraryPath)
{
    std::string d = hello_dir("pkgconfig");
    std::string line = readme_line("pkg-config --cflags --libs rmutex)");
    ASSERT_FALSE(line.empty());
    std::string out;
    ASSERT_EQ(0, run("cd " + sh_quote(d) + " && " + pkg_config_env() + line, &out))
        << "the README's line failed: " << line << "\n" << out;
    expect_hello_runs(d + "/hello");
}

TEST_F(InstalledPrefix, HelloBuiltWithTheReadmesCMakeLinesRunsWithoutLdLibraryPath)
{
    std::string d = hello_dir("cmake");
    std::string lines = readme_block("cmake", "find_package(rmutex");
    ASSERT_FALSE(lines.empty());
    spit(d + "/CMakeLists.txt",
         "cmake_minimum_required(VERSION 3.21)\nproject(hello C)\n" + lines);
    std::string cmake = sh_quote(RMUTEX_TEST_CMAKE), out;
    ASSERT_EQ(0, run(cmake + " -S " + sh_quote(d) + " -B " + sh_quote(d + "/build") +
                         " -DCMAKE_PREFIX_PATH=" + sh_quote(in().prefix()) +
                         " -DCMAKE_C_COMPILER=" + sh_quote(RMUTEX_TEST_CC),
                     &out))
        << "find_package(rmutex) against the prefix failed:\n" << out;
    ASSERT_EQ(0, run(cmake + " --build " + sh_quote(d + "/build"), &out)) << out;
    expect_hello_runs(d + "/build/hello");
}

TEST_F(InstalledPrefix, TheInstalledCliRunsACommandUnderTheLock)
{
#if !RMUTEX_TEST_HAS_CLI
    GTEST_SKIP() << "built without the rmutex command (RMUTEX_BUILD_CLI=OFF)";
#endif
    std::string cli = in().bindir() + "/rmutex", name = lock_name();
    expect_loads_from_prefix(cli);
    EXPECT_EQ("held " + name,
              expect_holds_while_running(
                  { cli, "run", "-n", name, "--", "sh", "-c", "echo \"held $RMUTEX_LOCK\"; read x" },
                  name));
}

TEST_F(InstalledPrefix, AProgramBuiltWithTheSwapsPkgConfigFileRuns)
{
#if !RMUTEX_TEST_HAS_SWAP
    GTEST_SKIP() << "built without the shim and the header swap (RMUTEX_BUILD_SHIM=OFF)";
#endif
    std::string d = in().dir() + "/swap", name = lock_name();
    mkdir(d.c_str(), 0755);
    spit(d + "/swapped.c",
         "#include <rmutex/pthread.h>\n"
         "#include <stdio.h>\n"
         "static pthread_mutex_t m = RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED(\"" + name + "\");\n"
         "int main(void)\n"
         "{\n"
         "    if (pthread_mutex_lock(&m) != 0) return 1;\n"
         "    printf(\"held %s\\n\", rmutex_version_string());\n"
         "    fflush(stdout);\n"
         "    getchar();\n"
         "    return pthread_mutex_unlock(&m) != 0;\n"
         "}\n");
    std::string out;
    ASSERT_EQ(0, run("cd " + sh_quote(d) + " && " + pkg_config_env() +
                         "cc swapped.c -o swapped $(pkg-config --cflags --libs rmutex-pthread)",
                     &out))
        << "rmutex-pthread.pc does not build a swapped program:\n" << out;
    expect_loads_from_prefix(d + "/swapped");
    expect_holds_while_running({ d + "/swapped" }, name);
}

} // namespace
