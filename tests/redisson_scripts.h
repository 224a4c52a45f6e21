/* redisson_scripts.h -- Redisson's RLock scripts, as its protocol notes
 * give them (redisson-lock-design.md section 2), shared by the
 * compatibility tests' second client (redisson_client.h) and the
 * benchmark's baseline (bench/w1_pairs.c).  Plain C string literals. */
#ifndef RMUTEX_TEST_REDISSON_SCRIPTS_H
#define RMUTEX_TEST_REDISSON_SCRIPTS_H

/* §2.1: KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner.  nil = acquired or
 * re-entered, integer = the lock's PTTL. */
#define REDISSON_ACQUIRE_LUA \
    "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then\n" \
    "    redis.call('hincrby', KEYS[1], ARGV[2], 1);\n" \
    "    redis.call('pexpire', KEYS[1], ARGV[1]);\n" \
    "    return nil;\n" \
    "end;\n" \
    "return redis.call('pttl', KEYS[1]);\n"

/* §2.2: KEYS = lock, channel, unlock latch; ARGV = message (0), lease,
 * owner, publish command, latch ttl.  nil = not ours, 0 = still held
 * (reentrant), 1 = released.  The client DELs the latch afterwards. */
#define REDISSON_UNLOCK_LUA \
    "local done = redis.call('get', KEYS[3]);\n" \
    "if done ~= false then\n" \
    "    return tonumber(done);\n" \
    "end;\n" \
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then\n" \
    "    return nil;\n" \
    "end;\n" \
    "local left = redis.call('hincrby', KEYS[1], ARGV[3], -1);\n" \
    "if left > 0 then\n" \
    "    redis.call('pexpire', KEYS[1], ARGV[2]);\n" \
    "    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);\n" \
    "    return 0;\n" \
    "end;\n" \
    "redis.call('del', KEYS[1]);\n" \
    "redis.call(ARGV[4], KEYS[2], ARGV[1]);\n" \
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]);\n" \
    "return 1;\n"

#endif
