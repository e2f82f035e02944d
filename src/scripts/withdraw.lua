-- Compare-and-delete of a failed acquire attempt's vote, without a word to
-- waiters: a withdrawn minority vote is not a release (no holder let go), and
-- announcing it would wake every waiter at once into the same split.
-- KEYS[1]: the lock key.
-- ARGV[1]: the attempt's token.
-- Returns 1 when the key held the token and was deleted, 0 otherwise. A key of
-- another type fails with WRONGTYPE and is left untouched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
