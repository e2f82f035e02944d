-- Compare-and-delete: remove the key only while this token holds it, and
-- tell waiters at once.
-- KEYS[1]: the lock key.
-- ARGV[1]: the holder's token (for release --force, the value just read
-- there); ARGV[2]: the release channel of the key.
-- Returns 1 when the key was deleted (and the token published on ARGV[2], so
-- that a waiter hearing the same release from every server wakes once),
-- 0 when it is absent or held by another value. A key of another type fails
-- with WRONGTYPE and is left untouched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
