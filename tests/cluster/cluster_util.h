/* cluster_util.h -- a Redis Cluster on loopback for the tests: primaries
 * and replicas started as real redis-server processes (the harness's
 * RedisServer), the slots split by hand, and the operations the tests
 * inflict on it -- slot migrations step by step, CLUSTER FAILOVER, kill -9
 * and restart.  A test program starts one and keeps it for all its tests. */
#ifndef RMUTEX_TEST_CLUSTER_UTIL_H
#define RMUTEX_TEST_CLUSTER_UTIL_H

#include "harness.h"

namespace rmt {

struct Cluster {
    std::vector<std::unique_ptr<RedisServer>> nodes;
    std::vector<std::string> ids;

    /* n primaries with the slots split evenly, and replicas_each replicas
     * of each; ready when every node agrees and every replica is linked. */
    bool start(int n, int replicas_each = 0)
    {
        primaries = n;
        for (int i = 0; i < n * (1 + replicas_each); i++) {
            auto s = RedisServer::start({"--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
                                         "--cluster-config-file", "nodes.conf",
                                         "--repl-diskless-sync-delay", "0"});
            if (!s) return false;
            nodes.push_back(std::move(s));
        }
        int per = 16384 / n;
        for (size_t i = 0; i < nodes.size(); i++) {
            Redis r("127.0.0.1", nodes[i]->port());
            ids.push_back(r.cmd({"CLUSTER", "MYID"}).str());
            if ((int)i < n) {
                int lo = (int)i * per, hi = (int)i == n - 1 ? 16383 : ((int)i + 1) * per - 1;
                if (r.cmd({"CLUSTER", "ADDSLOTSRANGE", std::to_string(lo), std::to_string(hi)}).str() != "OK")
                    return false;
            }
            if (i) r.cmd({"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes[0]->port())});
        }
        /* A replica can follow its primary once it knows it. */
        for (size_t i = n; i < nodes.size(); i++) {
            const std::string &primary = ids[(i - n) % n];
            if (!wait_until([&] {
                    return client((int)i).cmd({"CLUSTER", "REPLICATE", primary}).str() == "OK";
                }, ms(10000)))
                return false;
        }
        if (!wait_until([&] { return stable(); }, ms(30000))) return false;
        if (!replicas_each) return true;
        /* CLUSTER SLOTS lists a replica only once its replication offset is
         * not 0, i.e. after a first write: make one on every primary. */
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 100000; k++) {
                std::string key = "rmt:warm:" + std::to_string(k);
                if (owner(slot(key)) != i) continue;
                client(i).cmd({"SET", key, "1"});
                break;
            }
        return wait_until([&] {
            Reply r = client(0).cmd({"CLUSTER", "SLOTS"});
            if (!r || r->type != REDIS_REPLY_ARRAY) return false;
            for (size_t i = 0; i < r->elements; i++)
                if (r->element[i]->elements < 3 + (size_t)replicas_each) return false;
            return true;
        }, ms(10000));
    }

    /* Every running node says ok, every primary's slots are served, every
     * running replica is linked to its primary. */
    bool stable()
    {
        for (size_t i = 0; i < nodes.size(); i++) {
            if (!nodes[i]->running()) continue;
            Redis r("127.0.0.1", nodes[i]->port());
            if (r.cmd({"CLUSTER", "INFO"}).str().find("cluster_state:ok") == std::string::npos) return false;
            Reply slots = r.cmd({"CLUSTER", "SLOTS"});
            if (!slots || slots->type != REDIS_REPLY_ARRAY || slots->elements < (size_t)primaries) return false;
            std::string role = r.cmd({"ROLE"}).r ? r.cmd({"ROLE"})->element[0]->str : "";
            if (role == "slave" &&
                r.cmd({"INFO", "replication"}).str().find("master_link_status:up") == std::string::npos)
                return false;
        }
        return true;
    }

    /* The index of the node on port. */
    int index_of(long long port) const
    {
        for (size_t k = 0; k < nodes.size(); k++)
            if (nodes[k]->port() == port) return (int)k;
        return -1;
    }

    /* The index of a running replica of node i, or -1. */
    int replica_of(int i)
    {
        for (size_t k = 0; k < nodes.size(); k++) {
            if ((int)k == i || !nodes[k]->running()) continue;
            Reply role = client((int)k).cmd({"ROLE"});
            if (role && role->type == REDIS_REPLY_ARRAY && std::string(role->element[0]->str) == "slave" &&
                role->element[2]->integer == nodes[i]->port())
                return (int)k;
        }
        return -1;
    }

    /* CLUSTER FAILOVER on replica k; true once the others redirect to it. */
    bool failover(int k)
    {
        if (client(k).cmd({"CLUSTER", "FAILOVER"}).str() != "OK") return false;
        return wait_until([&] {
            Reply role = client(k).cmd({"ROLE"});
            return role && std::string(role->element[0]->str) == "master";
        }, ms(10000));
    }

    void kill9(int i)
    {
        nodes[i]->kill9();
        clients.resize(nodes.size());
        clients[i].reset();
    }

    /* Restart every killed node (on its nodes.conf: it rejoins) and wait
     * for a stable cluster. */
    bool heal()
    {
        for (size_t i = 0; i < nodes.size(); i++) {
            if (nodes[i]->running()) continue;
            if (clients.size() > i) clients[i].reset();
            if (!nodes[i]->restart()) return false;
        }
        return wait_until([&] { return stable(); }, ms(30000));
    }

    /* The seeds are the first primaries. */
    std::string url(const std::string &opts = "") const
    {
        std::string u = "redis-cluster://";
        for (size_t i = 0; i < (size_t)primaries; i++)
            u += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(nodes[i]->port());
        return opts.empty() ? u : u + "?" + opts;
    }

    int slot(const std::string &key)
    {
        size_t ask = 0;
        while (ask < nodes.size() && !nodes[ask]->running()) ask++;
        Redis r("127.0.0.1", nodes[ask]->port());
        return (int)r.cmd({"CLUSTER", "KEYSLOT", key}).integer();
    }

    /* The index of the node that owns slot, asked of a running node. */
    int owner(int slot)
    {
        size_t ask = 0;
        while (ask < nodes.size() && !nodes[ask]->running()) ask++;
        if (ask == nodes.size()) return -1;
        Redis r("127.0.0.1", nodes[ask]->port());
        Reply rep = r.cmd({"CLUSTER", "SLOTS"});
        for (size_t i = 0; rep && i < rep->elements; i++) {
            redisReply *e = rep->element[i];
            if (slot >= e->element[0]->integer && slot <= e->element[1]->integer)
                return index_of(e->element[2]->element[1]->integer);
        }
        return -1;
    }

    Redis &client(int i)
    {
        while (clients.size() < nodes.size()) clients.emplace_back();
        if (!clients[i]) clients[i] = std::make_unique<Redis>("127.0.0.1", nodes[i]->port());
        return *clients[i];
    }

    /* The steps of a slot migration, by hand (reference: cluster-sentinel.md 6.1). */
    bool begin_migration(int slot, int from, int to)
    {
        return client(to).cmd({"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", ids[from]}).str() == "OK" &&
               client(from).cmd({"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", ids[to]}).str() == "OK";
    }
    bool migrate_keys(int slot, int from, int to)
    {
        for (;;) {
            Reply keys = client(from).cmd({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
            if (!keys || keys->type != REDIS_REPLY_ARRAY) return false;
            if (keys->elements == 0) return true;
            std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", std::to_string(nodes[to]->port()), "", "0",
                                             "5000", "KEYS"};
            for (size_t i = 0; i < keys->elements; i++) argv.emplace_back(keys->element[i]->str, keys->element[i]->len);
            Reply m = client(from).cmd(argv);
            if (m.is_error()) return false;
        }
    }
    bool finish_migration(int slot, int from, int to)
    {
        bool ok = client(to).cmd({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", ids[to]}).str() == "OK" &&
                  client(from).cmd({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", ids[to]}).str() == "OK";
        for (size_t i = 0; i < nodes.size(); i++)
            if ((int)i != from && (int)i != to)
                client((int)i).cmd({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", ids[to]});
        return ok;
    }
    bool move_slot(int slot, int to)
    {
        int from = owner(slot);
        return from >= 0 && from != to && begin_migration(slot, from, to) && migrate_keys(slot, from, to) &&
               finish_migration(slot, from, to);
    }

    std::vector<std::unique_ptr<Redis>> clients;
    int primaries = 0;
};

} // namespace rmt

#endif
