-- The wait queue of one lock (src/queue.rs): who waits, in the order they
-- began, on this server's clock. Entries that are not refreshed expire.
-- KEYS[1]: the order (a sorted set: member -> server time of joining, ms).
-- KEYS[2]: the deadlines (a sorted set: member -> server time it expires, ms).
-- ARGV[1]: 'peek', 'join' (join, or refresh an entry keeping its place) or
--          'leave'; ARGV[2]: the member; ARGV[3]: an entry's lifetime, ms.
-- Returns {rank of the member (0 first, -1 absent), entries, the first
-- member or ''} after the change. Expired entries are purged first, so a
-- waiter that died leaves the queue one lifetime after its last refresh.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local life = tonumber(ARGV[3])
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, m in ipairs(dead) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('ZREM', KEYS[2], m)
end
if ARGV[1] == 'join' then
  redis.call('ZADD', KEYS[1], 'NX', now, ARGV[2])
  redis.call('ZADD', KEYS[2], now + life, ARGV[2])
  -- Every key redlock writes expires: both go one lifetime after the last
  -- refresh of any entry.
  redis.call('PEXPIRE', KEYS[1], life)
  redis.call('PEXPIRE', KEYS[2], life)
elseif ARGV[1] == 'leave' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[2])
end
local rank = redis.call('ZRANK', KEYS[1], ARGV[2])
local first = redis.call('ZRANGE', KEYS[1], 0, 0)
return {rank or -1, redis.call('ZCARD', KEYS[1]), first[1] or ''}
