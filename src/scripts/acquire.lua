-- Take the lock when the key is free, and draw a fencing number.
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter.
-- ARGV[1]: this holder's token; ARGV[2]: the TTL in milliseconds;
-- ARGV[3]: the client's proposed fence (its clock in microseconds plus half
-- the window), or '' to draw none; ARGV[4]: the window in microseconds;
-- ARGV[5]: the counter's lifetime in milliseconds (the TTL plus the linger).
-- (Ten words in all with EVALSHA, its SHA, the key count and the keys: Redis
-- answers an unauthenticated command of more than ten with a protocol error
-- instead of NOAUTH.)
-- Returns {1, fence} when the key was set (fence is -1 without fencing), or
-- {0, holder, pttl} when another value holds it (pttl is -1 when the holder
-- set no expiry).
-- The draw, only where this server grants the lock:
--   fence = max(counter + 1, clamp(proposal, now, now + window))
-- with now this server's clock (TIME) in microseconds and an absent counter
-- counting as 0; the counter keeps the fence for ARGV[5] ms. Why this never
-- goes backwards from one holder to the next, even across a server that
-- lost its data: src/fence.rs. Numbers stay below 2^53, exact in Lua.
-- A key of another type fails with WRONGTYPE from GET, and is left untouched
-- (SET NX alone would just answer nil and hide the misconfiguration).
if redis.replicate_commands then
  -- Redis 3.2 to 4: replicate the writes, not the script that reads TIME.
  redis.replicate_commands()
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] == '' then
    return {1, -1}
  end
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local proposal = math.min(math.max(tonumber(ARGV[3]), now), now + tonumber(ARGV[4]))
  local fence = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, proposal)
  redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[5])
  return {1, fence}
end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
