-- Delete the lock whoever holds it (release --force), and tell waiters
-- (the message is the deleted token, as release.lua sends).
-- KEYS[1]: the lock key.
-- ARGV[1]: the release channel of the key.
-- Returns 1 when a lock was deleted, 0 when the key was absent.
-- A key of another type fails with WRONGTYPE and is left untouched: it is
-- not a lock, and deleting it could destroy someone's data.
local holder = redis.call('GET', KEYS[1])
if holder then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[1], holder)
  return 1
end
return 0
