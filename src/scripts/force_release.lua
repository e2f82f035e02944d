-- Delete the lock whoever holds it (release --force), and tell waiters.
-- KEYS[1]: the lock key.
-- ARGV[1]: the release channel of the key.
-- Returns 1 when a lock was deleted, 0 when the key was absent.
-- A key of another type fails with WRONGTYPE and is left untouched: it is
-- not a lock, and deleting it could destroy someone's data.
if redis.call('GET', KEYS[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[1], 'released')
  return 1
end
return 0
