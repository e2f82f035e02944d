-- The announcement of a release, shared by release.lua, withdraw.lua (a
-- shared holder's release) and shared_force.lua: build.rs puts this file
-- in front of each of them.
-- announce(channel, order, deadlines, released) publishes "FIRST\nRELEASED"
-- on `channel`: FIRST is the waiter this release calls (below), '' when
-- none, so that only it attempts; RELEASED lets a waiter that hears the
-- same release from every server wake once. The waiter called also hears
-- it on `channel` .. '\n' .. the first 8 characters of its entry
-- (src/lock/keys.rs, `wake_channel`): an ordered waiter listens there only,
-- so that a release wakes one waiter, not all of them. Best effort
-- (redis.pcall): a user the ACL denies the channel (Redis 7's default for a
-- new user) still releases; its waiters fall back on their backoff.
--
-- Whom a release calls: the first waiter in the queue (`order`,
-- `deadlines`: src/queue.rs), once those that stopped refreshing are gone,
-- that no release called within CALL_GRACE. A call is a member
-- 'call:' .. WAITER of `deadlines`, scored by the time it lapses, so the
-- purge of lapsed entries ends it too; it is never in `order`, so no
-- waiter's rank counts it. Two releases that come before the first waiter
-- called has taken its place (`--limit N`: places freed together) call two
-- waiters, not the same one twice.
-- A call also bounds the waiter's entry to CALL_GRACE: a live waiter
-- attempts at once when called, and its attempt either takes the lock
-- (leaving the queue) or refreshes its entry for a whole lifetime; a dead
-- one (SIGKILL, a crashed host) stops holding up a free lock, and the
-- waiters behind it, after CALL_GRACE instead of a lifetime. The bound:
-- a called waiter slower than CALL_GRACE to attempt (a host starved for a
-- second) loses its place and joins again at the back; order, never
-- exclusion, depends on it. src/queue.rs names the same number
-- (`queue::CALL_GRACE`).
local CALL_GRACE = 1000
local function announce(channel, order, deadlines, released)
  local first = ''
  if redis.call('EXISTS', order) == 1 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', deadlines, '-inf', now)) do
      redis.call('ZREM', order, m)
      redis.call('ZREM', deadlines, m)
    end
    -- Waiters called and not yet in are few (one per release within the
    -- grace); past the first 64, call the first waiter again.
    local waiters = redis.call('ZRANGE', order, 0, 63)
    first = waiters[1] or ''
    for _, m in ipairs(waiters) do
      if not redis.call('ZSCORE', deadlines, 'call:' .. m) then
        first = m
        break
      end
    end
    if first ~= '' then
      local due = now + CALL_GRACE
      redis.call('ZADD', deadlines, due, 'call:' .. first)
      -- A member the deadlines do not know (one of the two keys evicted
      -- or edited) gets the same short lease, and so lapses.
      local deadline = tonumber(redis.call('ZSCORE', deadlines, first))
      if not deadline or deadline > due then
        redis.call('ZADD', deadlines, due, first)
      end
    end
  end
  local message = first .. '\n' .. released
  redis.pcall('PUBLISH', channel, message)
  if first ~= '' then
    redis.pcall('PUBLISH', channel .. '\n' .. string.sub(first, 1, 8), message)
  end
end
