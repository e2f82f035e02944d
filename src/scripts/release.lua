-- Compare-and-delete: remove the key only while this token holds it, and
-- tell waiters at once whose turn it is.
-- KEYS[1]: the lock key; KEYS[2], KEYS[3]: the wait queue's order and
-- deadlines (src/queue.rs).
-- ARGV[1]: the holder's token (for release --force, the value just read
-- there); ARGV[2]: the release channel of the key.
-- Returns 1 when the key was deleted, 0 when it is absent or held by another
-- value. A deletion is announced on ARGV[2] as "FIRST\nTOKEN": the waiter
-- first in the queue here ('' when none), so that only it attempts, and the
-- token, so that a waiter hearing the same release from every server wakes
-- once. A waiter named first also hears it on ARGV[2] .. '\n' .. the first 8
-- characters of its entry (src/lock/keys.rs, wake_channel): an ordered waiter
-- listens there only, so that a release wakes one waiter, not all of them.
-- A key of another type fails with WRONGTYPE and is left untouched.
-- The announcement is best effort (redis.pcall): a user the ACL denies the
-- channel (Redis 7's default for a new user) still releases; its waiters
-- fall back on their backoff.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local first = ''
  if redis.call('EXISTS', KEYS[2]) == 1 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    -- Waiters that stopped refreshing (dead, or gone) are not named.
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
      redis.call('ZREM', KEYS[2], m)
      redis.call('ZREM', KEYS[3], m)
    end
    first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] or ''
  end
  local message = first .. '\n' .. ARGV[1]
  redis.pcall('PUBLISH', ARGV[2], message)
  if first ~= '' then
    redis.pcall('PUBLISH', ARGV[2] .. '\n' .. string.sub(first, 1, 8), message)
  end
  return 1
end
return 0
