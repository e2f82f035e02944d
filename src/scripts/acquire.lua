-- Take the lock when the key is free, and draw a fencing number.
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter (redlock:fence:KEY).
-- ARGV[1]: this holder's token; ARGV[2]: the TTL in milliseconds;
-- ARGV[3]: '1' to draw a fencing number, '0' not to.
-- Returns {1, fence} when the key was set (fence is the counter after INCR,
-- or -1 without fencing), or {0, holder, pttl} when another value holds it
-- (pttl is -1 when the holder set no expiry). The counter only moves when
-- this server grants the lock, and it has no TTL: it must outlive every lock.
-- A key of another type fails with WRONGTYPE from GET, and is left untouched
-- (SET NX alone would just answer nil and hide the misconfiguration).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] == '1' then
    return {1, redis.call('INCR', KEYS[2])}
  end
  return {1, -1}
end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
