/* tls_util.h -- what the TLS test programs share: TLS on for every server
 * the harness starts (RMUTEX_TEST_TLS=1, set before main), the harness's
 * certificates, and the bad ones the error tests need, made with openssl
 * from the same CA (a wrong name, an expired one) or from a CA nobody
 * trusts. */
#ifndef RMUTEX_TEST_TLS_UTIL_H
#define RMUTEX_TEST_TLS_UTIL_H

#include "harness.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace rmt {

/* Every RedisServer of the program listens on TLS too. */
inline const bool tls_program = (setenv("RMUTEX_TEST_TLS", "1", 1), true);

struct BadCerts {
    std::string other_crt, other_key;     /* the CA's, for other.example only */
    std::string expired_crt, expired_key; /* the CA's, for localhost, expired yesterday */
    std::string rogue_ca;                 /* a CA the servers do not know */
    std::string rogue_crt, rogue_key;     /* a client certificate that CA signed */
};

inline const BadCerts &bad_certs()
{
    static BadCerts b;
    static std::once_flag once;
    std::call_once(once, [] {
        const TlsFiles &t = tls_files();
        std::string d = t.dir + "/bad";
        std::filesystem::create_directories(d);
        const std::string ec = "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
        const std::string sign = "openssl x509 -req -CA '" + t.ca + "' -CAkey '" + t.ca_key + "' -CAcreateserial ";
        std::string cmd =
            "cd '" + d + "' && exec >openssl.log 2>&1 && "
            "printf '[other]\\nsubjectAltName=DNS:other.example\\n"
            "[srv]\\nsubjectAltName=DNS:localhost,IP:127.0.0.1\\n' >ext.cnf && " +
            ec + "-subj /CN=other.example -keyout other.key -out other.csr && " + sign +
            "-in other.csr -days 30 -extfile ext.cnf -extensions other -out other.crt && " + ec +
            "-subj /CN=localhost -keyout expired.key -out expired.csr && " + sign +
            "-in expired.csr -days -1 -extfile ext.cnf -extensions srv -out expired.crt && "
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 "
            "-subj '/CN=rogue CA' -keyout rogue-ca.key -out rogue-ca.crt && " +
            ec + "-subj /CN=rogue -keyout rogue.key -out rogue.csr && "
            "openssl x509 -req -CA rogue-ca.crt -CAkey rogue-ca.key -CAcreateserial -in rogue.csr "
            "-days 30 -out rogue.crt";
        int st = 0;
        shell(cmd, &st);
        if (st != 0) {
            ADD_FAILURE() << "openssl could not make the bad certificates: see " << d << "/openssl.log";
            return;
        }
        b = BadCerts{d + "/other.crt", d + "/other.key", d + "/expired.crt", d + "/expired.key",
                     d + "/rogue-ca.crt", d + "/rogue.crt", d + "/rogue.key"};
    });
    return b;
}

/* s's TLS URL with more options. */
inline std::string tls_url(const RedisServer &s, const std::string &opts = "")
{
    return opts.empty() ? s.url() : s.url() + "&" + opts;
}

/* rediss://127.0.0.1:<s's TLS port> with only opts (no certificate options). */
inline std::string bare_tls_url(const RedisServer &s, const std::string &host = "127.0.0.1",
                                const std::string &opts = "")
{
    return "rediss://" + host + ":" + std::to_string(s.tls_port()) + (opts.empty() ? "" : "?" + opts);
}

/* The local ports of the connections named "rmutex:..." that s has. */
inline std::vector<int> rmutex_local_ports(Redis &r)
{
    std::vector<int> ports;
    for (auto &c : r.client_list())
        if (c["name"].rfind("rmutex:", 0) == 0) {
            const std::string &laddr = c["laddr"];
            ports.push_back(atoi(laddr.substr(laddr.rfind(':') + 1).c_str()));
        }
    return ports;
}

} // namespace rmt

#endif
