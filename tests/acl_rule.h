/* acl_rule.h -- the least-privilege Redis ACL rule for rmutex, as docs/acl.md
 * gives it.  The harness's ACL mode (RMUTEX_TEST_ACL=1) creates this user and
 * runs the library as it; acl_test.cc checks that docs/acl.md says the same
 * and that less is refused with EACCES. */
#ifndef RMUTEX_TEST_ACL_RULE_H
#define RMUTEX_TEST_ACL_RULE_H

#include <string>
#include <vector>

namespace rmt {

/* The rule after "ACL SETUSER <user> on ><password>", word by word. */
inline const std::vector<std::string> &acl_rule()
{
    static const std::vector<std::string> rule = {
        "resetkeys", "~*", "resetchannels", "&redisson_lock__channel:*", "&rmutex_fair_channel:*",
        "&rmutex_cond_channel:*", "&redisson_rwlock:*", "&rmutex_sem:*",
        "&rmutex_barrier:*", "&rmutex_once:*",
        "-@all", "+evalsha", "+eval", "+subscribe", "+unsubscribe", "+ping", "+client|setname",
        "+select", "+wait",
        /* called by the scripts */
        "+del", "+exists", "+get", "+hexists", "+hset", "+incr", "+incrby", "+pexpire", "+pttl", "+publish",
        "+set", "+time", "+type", "+zadd", "+zcard", "+zrange", "+zrangebyscore", "+zrem",
        "+zscore",
        /* and by the condition variables' */
        "+hget", "+hincrby", "+zcount",
        /* and by force_unlock.lua, inspect.lua, the holder registry's
         * whois.lua, and rmutex_list */
        "+hkeys", "+pubsub|numsub", "+hmget", "+scan",
        /* and by the read-write locks' */
        "+hdel", "+hlen",
        /* and by rmutex_waits (rmutex status's waiters, rmutex deadlocks) */
        "+hgetall",
    };
    return rule;
}

/* The same as one line. */
inline std::string acl_rule_line()
{
    std::string s;
    for (auto &w : acl_rule()) s += (s.empty() ? "" : " ") + w;
    return s;
}

constexpr const char *kAclUser = "rmutex-test";
constexpr const char *kAclPassword = "Least-Privilege-1";

} // namespace rmt

#endif
