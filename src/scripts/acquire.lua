-- Take the lock when the key is free and it is this waiter's turn, draw a
-- fencing number, and keep the wait queue (src/queue.rs), in one step.
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter; KEYS[3], KEYS[4]: the
-- queue's order and deadlines (sorted sets: member -> server time of joining,
-- and -> server time it expires, ms).
-- ARGV[1]: this attempt's token; ARGV[2]: the waiter's queue member, or ''
-- to ignore the queue (--unordered); ARGV[3]: nine numbers, space-separated:
--   ttl ms; the client's proposed fence (its clock in microseconds plus half
--   the window) or '-' to draw none; the window in microseconds; the
--   counter's lifetime ms (the TTL plus the linger); join (1: a waiter not
--   granted takes or refreshes its place; 0: -n, which never queues); order
--   (1: only the first waiter may take a free key; 0: any, the fallback when
--   the servers' queues disagree); an entry's lifetime ms; when the waiter
--   began to wait, by its clock (ms), and how far this server lets that
--   differ from its own clock (ms).
-- A waiter's place is that time, clamped to this server's clock plus or minus
-- the window: waiters on clocks in step with each other and the servers get
-- the same order on every server (equal times by member), so that every
-- server names the same first waiter; a client clock further off moves its
-- waiter by at most the window.
-- (Ten words in all with EVALSHA, its SHA and the key count: Redis answers an
-- unauthenticated command of more than ten with a protocol error instead of
-- NOAUTH, hence the packed numbers.)
-- Returns {1, fence, score, deadline} when the key was set (fence -1 without
-- fencing; score and deadline are the waiter's entry, removed here because
-- it is served, or -1 when it had none: a withdrawal puts it back), or
-- {0, holder, pttl, rank, len, first} when it was not: holder is the value
-- holding the key ('' when the key is free but another waiter is first),
-- pttl its expiry (-1: none; -2: free), rank the member's place (0 first, -1
-- not queued), len the waiters queued, first the first of them ('' none).
-- The fence draw, only where this server grants the lock:
--   fence = max(counter + 1, clamp(proposal, now, now + window))
-- with now this server's clock (TIME) in microseconds and an absent counter
-- counting as 0; the counter keeps the fence for its lifetime. Why this never
-- goes backwards from one holder to the next, even across a server that
-- lost its data: src/fence.rs. Numbers stay below 2^53, exact in Lua.
-- A key of another type fails with WRONGTYPE from GET, and is left untouched
-- (SET NX alone would just answer nil and hide the misconfiguration).
if redis.replicate_commands then
  -- Redis 3.2 to 4: replicate the writes, not the script that reads TIME.
  redis.replicate_commands()
end
local ttl, proposal, window, life, join, order, qlife, since, skew = string.match(
  ARGV[3], '^(%d+) (%S+) (%d+) (%d+) ([01]) ([01]) (%d+) (%d+) (%d+)$')
local member = ARGV[2]
-- The queue is read only where it exists: an uncontended lock never pays
-- for it but one EXISTS.
local queued = member ~= '' and redis.call('EXISTS', KEYS[3]) == 1
local now_ms
if queued then
  local t = redis.call('TIME')
  now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- Waiters that stopped refreshing (dead, or gone) leave the queue.
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms)) do
    redis.call('ZREM', KEYS[3], m)
    redis.call('ZREM', KEYS[4], m)
  end
end
local function place(holder, pttl)
  if not queued and join == '1' and member ~= '' then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    queued = true
  end
  if not queued then
    return {0, holder, pttl, -1, 0, ''}
  end
  if join == '1' then
    local at = math.min(math.max(tonumber(since), now_ms - skew), now_ms + skew)
    redis.call('ZADD', KEYS[3], 'NX', at, member)
    redis.call('ZADD', KEYS[4], now_ms + tonumber(qlife), member)
    -- Every key redlock writes expires: the queue one entry lifetime after
    -- its last refresh.
    redis.call('PEXPIRE', KEYS[3], qlife)
    redis.call('PEXPIRE', KEYS[4], qlife)
  end
  local first = redis.call('ZRANGE', KEYS[3], 0, 0)[1] or ''
  return {0, holder, pttl, redis.call('ZRANK', KEYS[3], member) or -1,
          redis.call('ZCARD', KEYS[3]), first}
end
if queued and order == '1' then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if first and first ~= member then
    local holder = redis.call('GET', KEYS[1])
    if holder then
      return place(holder, redis.call('PTTL', KEYS[1]))
    end
    return place('', -2)
  end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ttl) then
  return place(redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]))
end
local score, deadline = -1, -1
if queued then
  local s = redis.call('ZSCORE', KEYS[3], member)
  if s then
    score, deadline = tonumber(s), tonumber(redis.call('ZSCORE', KEYS[4], member))
    redis.call('ZREM', KEYS[3], member)
    redis.call('ZREM', KEYS[4], member)
  end
end
if proposal == '-' then
  return {1, -1, score, deadline}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local draw = math.min(math.max(tonumber(proposal), now), now + tonumber(window))
local fence = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, draw)
redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', life)
return {1, fence, score, deadline}
