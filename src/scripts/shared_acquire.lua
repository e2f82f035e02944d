-- Join the shared holders of a lock (`--shared`), unless an exclusive
-- holder has it, and draw a fencing number.
-- KEYS[1]: the lock key; KEYS[2]: the shared holders (a sorted set, each
-- token scored by the server time in ms at which its entry expires);
-- KEYS[3]: the fencing counter.
-- ARGV[1]: this holder's token; ARGV[2]: the TTL in milliseconds;
-- ARGV[3]: '' to draw no fence, or 'PROPOSAL WINDOW' (microseconds, as in
-- acquire.lua); ARGV[4]: the counter's lifetime in milliseconds.
-- (Ten words in all with EVALSHA, as acquire.lua explains.)
-- Returns {1, fence} when joined (fence -1 without fencing), or
-- {0, holder, pttl} when an exclusive holder's token holds the lock key.
--
-- While any shared holder's entry is live on this server, the lock key
-- holds the marker 'redlock-shared' with a PTTL at least as long as the
-- latest entry's: an exclusive acquire (acquire.lua, SET NX) finds the key
-- taken and is refused, and this script finds an exclusive token there
-- and refuses. That is the whole exclusion (src/shared.rs).
if redis.replicate_commands then
  redis.replicate_commands()
end
local marker = 'redlock-shared'
local value = redis.call('GET', KEYS[1])
if value and value ~= marker then
  return {0, value, redis.call('PTTL', KEYS[1])}
end
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
redis.call('ZADD', KEYS[2], now_ms + ttl, ARGV[1])
if not value then
  redis.call('SET', KEYS[1], marker, 'PX', ttl)
elseif redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))
if ARGV[3] == '' then
  return {1, -1}
end
local proposal, window = string.match(ARGV[3], '^(%d+) (%d+)$')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
proposal = math.min(math.max(tonumber(proposal), now), now + tonumber(window))
local fence = math.max(tonumber(redis.call('GET', KEYS[3]) or '0') + 1, proposal)
redis.call('SET', KEYS[3], string.format('%.0f', fence), 'PX', ARGV[4])
return {1, fence}
