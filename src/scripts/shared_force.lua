-- `release --force` of the shared holders (`--shared`): delete the lock
-- key's marker and every entry, and tell the waiters as release.lua does
-- (announce.lua, in front of this file).
-- KEYS[1]: the lock key; KEYS[2]: the shared holders; KEYS[3], KEYS[4]: the
-- queue's order and deadlines (src/queue.rs).
-- ARGV[1]: the release channel.
-- Returns 1 when there was a marker to delete, 0 otherwise (then nothing
-- is touched: the key may hold an exclusive holder's token).
if redis.call('GET', KEYS[1]) ~= 'redlock-shared' then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
announce(ARGV[1], KEYS[3], KEYS[4], 'redlock-shared')
return 1
