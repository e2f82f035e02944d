-- The announcement of a release, shared by release.lua, withdraw.lua (a
-- shared holder's release) and shared_force.lua: src/lock/mod.rs and
-- src/shared.rs put this file in front of each of them.
-- announce(channel, order, deadlines, released) publishes "FIRST\nRELEASED"
-- on `channel`: FIRST is the waiter first in the queue (`order`,
-- `deadlines`: src/queue.rs) once those that stopped refreshing are gone, ''
-- when none, so that only it attempts; RELEASED lets a waiter that hears the
-- same release from every server wake once. The waiter named first also
-- hears it on `channel` .. '\n' .. the first 8 characters of its entry
-- (src/lock/keys.rs, wake_channel): an ordered waiter listens there only,
-- so that a release wakes one waiter, not all of them. Best effort
-- (redis.pcall): a user the ACL denies the channel (Redis 7's default for a
-- new user) still releases; its waiters fall back on their backoff.
local function announce(channel, order, deadlines, released)
  local first = ''
  if redis.call('EXISTS', order) == 1 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', deadlines, '-inf', now)) do
      redis.call('ZREM', order, m)
      redis.call('ZREM', deadlines, m)
    end
    first = redis.call('ZRANGE', order, 0, 0)[1] or ''
  end
  local message = first .. '\n' .. released
  redis.pcall('PUBLISH', channel, message)
  if first ~= '' then
    redis.pcall('PUBLISH', channel .. '\n' .. string.sub(first, 1, 8), message)
  end
end
