-- Compare-and-extend for a shared holder (`--shared`): make its entry last
-- at least (or, with ARGV[4] = 'exact', exactly: `run --keep`) the TTL
-- from now, and the lock key's marker as long as the latest live entry.
-- KEYS[1]: the lock key; KEYS[2]: the shared holders; KEYS[3]: the
-- fencing counter.
-- ARGV[1]: the holder's token; ARGV[2]: the TTL in milliseconds; ARGV[3]:
-- the counter's lifetime in milliseconds; ARGV[4]: 'exact' or ''.
-- Returns 1 when the token's entry is live here (and now extended), 0
-- when it is gone or expired, or the lock key holds no marker.
if redis.replicate_commands then
  redis.replicate_commands()
end
local marker = 'redlock-shared'
if redis.call('GET', KEYS[1]) ~= marker then
  return 0
end
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) <= now_ms then
  return 0
end
local wanted = now_ms + tonumber(ARGV[2])
if ARGV[4] == 'exact' or wanted > tonumber(score) then
  redis.call('ZADD', KEYS[2], wanted, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local left = math.max(tonumber(last[2]) - now_ms, 1)
-- Never below the latest live entry, never shortened otherwise.
if ARGV[4] == 'exact' or redis.call('PTTL', KEYS[1]) < left then
  redis.call('PEXPIRE', KEYS[1], left)
end
redis.call('PEXPIRE', KEYS[2], left)
local counter = redis.call('PTTL', KEYS[3])
if counter >= 0 and counter < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return 1
