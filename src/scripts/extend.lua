-- Compare-and-extend: make the lock last at least the given TTL from now,
-- only while this token holds the key. It never shortens: a renewal or a
-- `redlock extend --ttl 1s` inside a job whose lock has an hour left leaves
-- the hour (set_ttl.lua is the exact setting that `--keep` uses).
-- KEYS[1]: the lock key.
-- ARGV[1]: the holder's token; ARGV[2]: the TTL in milliseconds.
-- Returns 1 when the token holds the key (its TTL now at least ARGV[2]),
-- 0 when the key is absent or held by another value. A key of another type
-- fails with WRONGTYPE.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and left < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
return 0
