-- Compare-and-set-TTL: set the lock's TTL to exactly the given value, only
-- while this token holds the key; `run --keep` shortens the lock with it
-- when the command ends before the keep time.
-- KEYS[1]: the lock key.
-- ARGV[1]: the holder's token; ARGV[2]: the TTL in milliseconds.
-- Returns 1 when the TTL was set, 0 when the key is absent or held by
-- another value. A key of another type fails with WRONGTYPE.
-- The marker of shared holders (src/shared.rs) is no token: never touched
-- as one.
if ARGV[1] ~= 'redlock-shared' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
