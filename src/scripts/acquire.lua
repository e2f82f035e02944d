-- Take the lock when the key is free.
-- KEYS[1]: the lock key.
-- ARGV[1]: this holder's token; ARGV[2]: the TTL in milliseconds.
-- Returns {1} when the key was set, or {0, holder, pttl} when another value
-- holds it (pttl is -1 when the holder set no expiry).
-- A key of another type fails with WRONGTYPE from GET, and is left untouched
-- (SET NX alone would just answer nil and hide the misconfiguration).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1}
end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
