-- `release --force` of the shared holders (`--shared`): delete the lock
-- key's marker and every entry, and tell the waiters, naming the first in
-- the queue as release.lua does (also on its own channel).
-- KEYS[1]: the lock key; KEYS[2]: the shared holders; KEYS[3], KEYS[4]: the
-- queue's order and deadlines (src/queue.rs).
-- ARGV[1]: the release channel.
-- Returns 1 when there was a marker to delete, 0 otherwise (then nothing
-- is touched: the key may hold an exclusive holder's token).
if redis.call('GET', KEYS[1]) ~= 'redlock-shared' then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
local first = ''
if redis.call('EXISTS', KEYS[3]) == 1 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- Waiters that stopped refreshing (dead, or gone) are not named.
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
    redis.call('ZREM', KEYS[3], m)
    redis.call('ZREM', KEYS[4], m)
  end
  first = redis.call('ZRANGE', KEYS[3], 0, 0)[1] or ''
end
-- Best effort, as in release.lua.
local message = first .. '\nredlock-shared'
redis.pcall('PUBLISH', ARGV[1], message)
if first ~= '' then
  redis.pcall('PUBLISH', ARGV[1] .. '\n' .. string.sub(first, 1, 8), message)
end
return 1
