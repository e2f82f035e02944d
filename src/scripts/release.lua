-- Compare-and-delete: remove the key only while this token holds it.
-- KEYS[1]: the lock key.
-- ARGV[1]: the holder's token.
-- Returns 1 when the key was deleted, 0 when it is absent or held by another
-- value. A key of another type fails with WRONGTYPE and is left untouched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
