-- `release --force` of the shared holders (`--shared`): delete the lock
-- key's marker and every entry, and tell the waiters.
-- KEYS[1]: the lock key; KEYS[2]: the shared holders.
-- ARGV[1]: the release channel.
-- Returns 1 when there was a marker to delete, 0 otherwise (then nothing
-- is touched: the key may hold an exclusive holder's token).
if redis.call('GET', KEYS[1]) ~= 'redlock-shared' then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
-- Best effort, as in release.lua.
redis.pcall('PUBLISH', ARGV[1], 'redlock-shared')
return 1
