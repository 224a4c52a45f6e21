/* abi_test.cc -- the library's interface as compilers and linkers see it.
 *
 * LibraryExports: librmutex.so exports exactly the public API.  The API
 * is what include/rmutex.h declares RMUTEX_API; the library must
 * export every one of those functions and nothing else (an internal
 * function left without static or with default visibility, a helper of a
 * linked-in dependency) but what the toolchain adds: the linker's version
 * nodes (nm's 'A') and names reserved to the implementation (beginning
 * with "__" or "_" and a capital: a sanitizer's, the linker's section
 * bounds), with _init, _fini, _edata and _end.  The exports are read as
 * the shim's test reads its own: nm -D (the harness's exported_symbols).
 *
 * PublicHeader: no member of a struct the public headers define has a
 * name reserved to the implementation (C11 7.1.3: beginning with "__" or
 * "_" and a capital), which a C library or compiler macro may take. */
#include "harness.h"

#include <regex>
#include <set>

#ifndef RMUTEX_LIB
#error "RMUTEX_LIB must name librmutex.so"
#endif
#ifndef RMUTEX_HEADER
#error "RMUTEX_HEADER must name include/rmutex.h"
#endif
#ifndef RMUTEX_HEADERS
#error "RMUTEX_HEADERS must list the public headers, comma-separated"
#endif

namespace {

using namespace rmt;

/* A header's C: its text without comments and preprocessor lines. */
std::string code_of(const std::string &header)
{
    std::string text = read_file(header);
    EXPECT_FALSE(text.empty()) << header;
    text = std::regex_replace(text, std::regex(R"(/\*[\s\S]*?\*/)"), " ");
    text = std::regex_replace(text, std::regex(R"(//[^\n]*)"), " ");
    return std::regex_replace(text, std::regex(R"((^|\n)[ \t]*#([^\n]*\\\n)*[^\n]*)"), "\n");
}

/* The functions the header declares RMUTEX_API: the name before the first
 * '(' after each RMUTEX_API. */
std::set<std::string> declared_api()
{
    std::string text = code_of(RMUTEX_HEADER);
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

/* Each struct body of header, and the reserved names in it. */
std::vector<std::string> reserved_members(const std::string &header)
{
    std::string text = code_of(header);
    std::vector<std::string> found;
    std::regex body(R"(\bstruct\s+(\w*)\s*\{([^{}]*)\})"), reserved(R"(\b(__\w*|_[A-Z]\w*))");
    for (std::sregex_iterator b(text.begin(), text.end(), body), end; b != end; ++b) {
        std::string members = (*b)[2].str();
        for (std::sregex_iterator r(members.begin(), members.end(), reserved); r != end; ++r)
            found.push_back("struct " + (*b)[1].str() + ": " + (*r)[1].str());
    }
    return found;
}

TEST(PublicHeader, NoStructMemberHasANameReservedToTheImplementation)
{
    std::string headers = RMUTEX_HEADERS;
    size_t structs = 0;
    for (size_t at = 0; at < headers.size();) {
        size_t comma = headers.find(',', at);
        if (comma == std::string::npos) comma = headers.size();
        std::string h = headers.substr(at, comma - at);
        at = comma + 1;
        std::string text = code_of(h);
        std::regex any(R"(\bstruct\s+\w*\s*\{)");
        structs += std::distance(std::sregex_iterator(text.begin(), text.end(), any), std::sregex_iterator());
        for (const auto &m : reserved_members(h)) ADD_FAILURE() << h << ": " << m;
    }
    EXPECT_GE(structs, 6u) << "the parse found too few structs to mean anything";
}

} // namespace
