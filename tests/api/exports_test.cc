/* exports_test.cc -- librmutex.so exports exactly the public API.
 *
 * The API is what include/rmutex.h declares RMUTEX_API; the library must
 * export every one of those functions and nothing else (an internal
 * function left without static or with default visibility, a helper of a
 * linked-in dependency) but what the toolchain adds: the linker's version
 * nodes (nm's 'A') and names reserved to the implementation (beginning
 * with "__" or "_" and a capital: a sanitizer's, the linker's section
 * bounds), with _init, _fini, _edata and _end.  The exports are read as
 * the shim's test reads its own: nm -D (the harness's exported_symbols). */
#include "harness.h"

#include <regex>
#include <set>

#ifndef RMUTEX_LIB
#error "RMUTEX_LIB must name librmutex.so"
#endif
#ifndef RMUTEX_HEADER
#error "RMUTEX_HEADER must name include/rmutex.h"
#endif

namespace {

using namespace rmt;

/* The functions the header declares RMUTEX_API: its text without comments
 * and preprocessor lines, then the name before the first '(' after each
 * RMUTEX_API. */
std::set<std::string> declared_api()
{
    std::string text = read_file(RMUTEX_HEADER);
    text = std::regex_replace(text, std::regex(R"(/\*[\s\S]*?\*/)"), " ");
    text = std::regex_replace(text, std::regex(R"(//[^\n]*)"), " ");
    text = std::regex_replace(text, std::regex(R"((^|\n)[ \t]*#([^\n]*\\\n)*[^\n]*)"), "\n");
    std::set<std::string> names;
    std::regex decl(R"(\bRMUTEX_API\b[^;{(]*?\b([A-Za-z_]\w*)\s*\()");
    for (std::sregex_iterator i(text.begin(), text.end(), decl), end; i != end; ++i)
        names.insert((*i)[1].str());
    return names;
}

/* What the toolchain, not the library, exports. */
bool toolchains(const std::string &name, char type)
{
    static const std::set<std::string> linker = { "_init", "_fini", "_edata", "_end" };
    return type == 'A' || linker.count(name) || name.rfind("__", 0) == 0 ||
           (name.size() > 1 && name[0] == '_' && isupper(static_cast<unsigned char>(name[1])));
}

std::set<std::string> exported_api()
{
    std::set<std::string> names;
    for (const auto &[name, type] : exported_symbols(RMUTEX_LIB))
        if (!toolchains(name, type)) names.insert(name);
    return names;
}

std::string listed(const std::set<std::string> &names)
{
    std::string s;
    for (const auto &n : names) s += " " + n;
    return s;
}

TEST(LibraryExports, TheHeaderDeclaresTheApiAsThisTestReadsIt)
{
    auto api = declared_api();
    /* rmutex_init, rmutex_lock, ... rcond_wait: a parse that finds few or
     * none would let the tests below pass vacuously. */
    EXPECT_GE(api.size(), 40u) << listed(api);
    for (const char *f : { "rmutex_init", "rmutex_lock", "rmutex_unlock", "rmutex_version_string",
                           "rmutex_set_lost_callback", "rcond_wait", "rmutexattr_setcache" })
        EXPECT_EQ(1u, api.count(f)) << f << " not found among" << listed(api);
    EXPECT_EQ(0u, api.count("RMUTEX_API"));
}

TEST(LibraryExports, NoSymbolThatTheHeaderDoesNotDeclare)
{
    auto api = declared_api(), exported = exported_api();
    ASSERT_FALSE(exported.empty()) << "nm found no exports in " << RMUTEX_LIB;
    std::set<std::string> extra;
    for (const auto &n : exported)
        if (!api.count(n)) extra.insert(n);
    EXPECT_TRUE(extra.empty()) << "exported but not declared RMUTEX_API in rmutex.h:" << listed(extra);
}

TEST(LibraryExports, EveryFunctionTheHeaderDeclares)
{
    auto api = declared_api(), exported = exported_api();
    std::set<std::string> missing;
    for (const auto &n : api)
        if (!exported.count(n)) missing.insert(n);
    EXPECT_TRUE(missing.empty()) << "declared RMUTEX_API in rmutex.h but not exported:" << listed(missing);
}

} // namespace
