-- Compare-and-extend: make the lock last at least the given TTL from now,
-- only while this token holds the key, and keep its fencing counter (if
-- any) for at least as long as a fresh acquisition would, so that `status`
-- still reads the holder's fence during a long hold. It never shortens
-- either: a renewal or a `redlock extend --ttl 1s` inside a job whose lock
-- has an hour left leaves the hour (set_ttl.lua is the exact setting that
-- `--keep` uses), and the counter's lifetime is what the fencing argument
-- (src/fence.rs) relies on.
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter.
-- ARGV[1]: the holder's token; ARGV[2]: the TTL in milliseconds;
-- ARGV[3]: the counter's lifetime in milliseconds (the TTL plus the linger).
-- Returns 1 when the token holds the key (its TTL now at least ARGV[2]),
-- 0 when the key is absent or held by another value. A key of another type
-- fails with WRONGTYPE.
-- The marker of shared holders (src/shared.rs) is no token: never touched
-- as one.
if ARGV[1] ~= 'redlock-shared' and redis.call('GET', KEYS[1]) == ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and left < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  local counter = redis.call('PTTL', KEYS[2])
  if counter >= 0 and counter < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return 1
end
return 0
