-- Take the lock when the key is free and it is this waiter's turn, draw a
-- fencing number, keep the wait queue (src/queue.rs) and the grant record
-- (src/lock/record.rs), in one step; or join the shared holders
-- (`--shared`, src/shared.rs).
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter; KEYS[3], KEYS[4]: the
-- queue's order and deadlines (sorted sets: member -> server time of joining,
-- and -> server time it expires, ms); KEYS[5]: for an exclusive attempt, the
-- grant record (a hash, below); for a shared holder, the shared holders (a
-- sorted set: token -> server time its entry expires, ms).
-- ARGV[1]: this attempt's token; ARGV[2]: the waiter's queue member, or ''
-- to ignore the queue (--unordered); ARGV[4], with a tick only: the tick's
-- schedule (src/schedule: `cron 30 0 * * * in Europe/London`), which the
-- record keeps (`sch`) and a free key's attempt of another schedule is
-- refused by; ARGV[3]: sixteen numbers, packed as
-- little-endian doubles (struct.pack('<dddddddddddddddd'), src/lock/ops.rs
-- `Numbers`: one unpack is far cheaper than parsing text), all integers:
--   ttl ms; the client's proposed fence (its clock in microseconds plus half
--   the window) or -1 to draw none; the window in microseconds; the
--   counter's lifetime ms (the TTL plus the linger); join (1: a waiter not
--   granted takes or refreshes its place; 0: -n, which never queues); order
--   (1: only the first waiter may take a free key; 0: any, the fallback when
--   the servers' queues disagree); an entry's lifetime ms; when the waiter
--   began to wait, by its clock (ms), and how far this server lets that
--   differ from its own clock (ms); the places of the key (`--limit N`;
--   1 for the lock); shared (1: a shared holder, KEYS[5] the shared
--   holders); untaken since (server ms; -1: no such term): refuse a free
--   key that another token was granted here at or after it (`-n`'s rule),
--   and untaken for (ms, -1: none): the same, from this long before now
--   (with either, a {0, ...} refusal says this server's TIME); and the
--   tick's start and end (ms since the epoch, -1: no tick, `--once-per`):
--   refuse a free key whose record holds a tick that ends after this one
--   starts (it ran); and the tick's last moment (ms, -1: no tick): the
--   latest server time at which it may still be granted, its end plus the
--   clock allowance (src/lock/record.rs `Tick::last_grant_ms`): later, the
--   tick is over, whatever the record says (it may have expired).
-- A waiter's place is that time, clamped to this server's clock plus or minus
-- the window: waiters on clocks in step with each other and the servers get
-- the same order on every server (equal times by member), so that every
-- server names the same first waiter; a client clock further off moves its
-- waiter by at most the window.
-- A shared waiter's turn comes when no exclusive waiter is ahead of it (the
-- shared ones ahead go in with it): members of shared waits carry
-- '-shared.' (src/token.rs), and an exclusive waiter queued before a shared
-- one is served first, so neither kind starves the other.
-- (Eleven words with EVALSHA, its SHA and the key count: Redis answers an
-- unauthenticated command of more than ten with a protocol error instead of
-- NOAUTH; src/failure.rs reads it as the NOAUTH it stands for.)
-- Returns {1, fence, score, deadline, seconds, microseconds, at, token}
-- when granted (fence -1 without fencing; score and deadline are the
-- waiter's entry, removed here because it is served, or -1 when it had
-- none: a withdrawal puts it back; then the server's TIME; then the grant
-- record this grant replaced: when (server ms) and to which token the key
-- was last granted here, -1 and '' for none: `-n` judges its grant by it
-- after the fact, src/lock/record.rs), or
-- {0, holder, pttl, rank, len, first} when not: holder is the value holding
-- the key against this attempt ('' when the key is free, or held by shared
-- holders only, but another waiter goes first), pttl its expiry (-1: none;
-- -2: free), rank the member's place (0 first, -1 not queued), len the
-- waiters queued, first the first of them ('' none); or {2, token, start,
-- end} when the key is free but the record's tick (granted to token) ends
-- after this attempt's tick starts: the tick ran; or {3, token, at} when
-- the key is free but token was granted it at `at` (server ms), since the
-- untaken term; or {4, start, end, now} when the key is free but this
-- server's clock (now, ms) is past the tick's last moment: the tick is
-- over; or {5, token, schedule, end} when the record says the key's ticks
-- ran under another schedule (token ran the last one, whose tick ends at
-- end, -1: none), free or held. None of
-- those writes anything. With an untaken term, a {0, ...}
-- refusal ends with this server's TIME (seconds, microseconds).
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
local ttl, proposal, window, life, join, order, qlife, since, skew, places, shared,
  untaken_since, untaken_for, tick_start, tick_end, tick_last =
  struct.unpack('<dddddddddddddddd', ARGV[3])

local untaken = untaken_since >= 0 or untaken_for >= 0
join, order, shared = join == 1, order == 1, shared == 1
local record = not shared and KEYS[5]
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
-- `token::SHARED_MARKER` (src/lock/scripts_tests.rs checks every script's).
local marker = 'redlock-shared'
-- The grant record's terms, only where the key is free (a key held here is
-- refused below as held): the tick is over, the tick ran, or another token
-- took the key since this contender began. A round in flight holds the key
-- where it was granted, so only a grant that was kept (a holder that
-- released, or one that crashed) is met here; a withdrawal put its record
-- back.
if record and (untaken or tick_end >= 0) and redis.call('EXISTS', KEYS[1]) == 0 then
  -- A tick that is over by this server's clock is granted to nobody: a
  -- host held up since it computed its tick (a frozen VM, a suspended
  -- laptop) would otherwise run it once the record of its run had expired.
  if tick_last >= 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if now > tick_last then
      return {4, tick_start, tick_end, now}
    end
  end
  local rec = redis.call('HMGET', record, 'at', 'tok', 'ts', 'te', 'tt', 'sch')
  -- Two schedules for one key compute two ticks: refused, never run twice.
  if ARGV[4] and rec[6] and rec[6] ~= ARGV[4] then
    return {5, rec[5] or '', rec[6], tonumber(rec[4]) or -1}
  end
  if tick_end >= 0 and rec[4] and tonumber(rec[4]) > tick_start then
    return {2, rec[5], tonumber(rec[3]), tonumber(rec[4])}
  end
  if untaken and rec[1] and tonumber(rec[1]) >= 0 then
    local from = untaken_since
    if untaken_for >= 0 then
      local t = redis.call('TIME')
      from = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - untaken_for
    end
    if tonumber(rec[1]) >= from then
      return {3, rec[2], tonumber(rec[1])}
    end
  end
end
-- Whose turn it is: ours while fewer waiters than the key has places are
-- ahead of us (a member not queued counts behind every queued one): with
-- one place, only the first waiter's; with N (`--limit N`), any of the
-- first N may take a free place, so that N places freed at once are taken
-- by N waiters, not one. For a shared waiter: while no exclusive waiter is
-- ahead of it.
local blocked = false
if queued and order then
  if not shared then
    local rank = redis.call('ZRANK', KEYS[3], member) or redis.call('ZCARD', KEYS[3])
    blocked = rank >= places
  else
    local rank = redis.call('ZRANK', KEYS[3], member)
    if rank ~= 0 then
      for _, m in ipairs(redis.call('ZRANGE', KEYS[3], 0, rank and rank - 1 or -1)) do
        if not string.find(m, '-shared.', 1, true) then
          blocked = true
          break
        end
      end
    end
  end
end
-- What holds the key against this attempt when it is not granted ('' and
-- -2: the key is free but it is not our turn), else nil: the grant is made.
-- (Straight-line code rather than helper functions: a closure would cost
-- its upvalues on every call.)
local holder, pttl
if blocked then
  -- Held (by a token, or by shared holders, whom a shared waiter could
  -- join but for the waiter queued ahead): named, so that `-n` is busy at
  -- once; free: another waiter's turn.
  holder = redis.call('GET', KEYS[1])
  if holder then
    pttl = redis.call('PTTL', KEYS[1])
  else
    holder, pttl = '', -2
  end
elseif shared then
  -- While any shared holder's entry is live here, the lock key holds the
  -- marker with a PTTL at least as long as the latest entry's: an exclusive
  -- SET NX finds the key taken, and a shared join finds an exclusive token
  -- and is refused. That is the whole exclusion (src/shared.rs).
  local value = redis.call('GET', KEYS[1])
  if value and value ~= marker then
    holder, pttl = value, redis.call('PTTL', KEYS[1])
  else
    local t = redis.call('TIME')
    local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', at)
    redis.call('ZADD', KEYS[5], at + ttl, ARGV[1])
    if not value then
      redis.call('SET', KEYS[1], marker, 'PX', ttl)
    elseif redis.call('PTTL', KEYS[1]) < ttl then
      redis.call('PEXPIRE', KEYS[1], ttl)
    end
    redis.call('PEXPIRE', KEYS[5], redis.call('PTTL', KEYS[1]))
  end
elseif not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ttl) then
  holder, pttl = redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])
end
if holder then
  -- Two schedules for one key, met while a holder runs: refused as on a
  -- free key, so that a host of another schedule is told (64) at every
  -- firing, not only at those that find the key free (with a job longer
  -- than the hosts' spread, never).
  if record and ARGV[4] and holder ~= '' then
    local rec = redis.call('HMGET', record, 'tt', 'sch', 'te')
    if rec[2] and rec[2] ~= ARGV[4] then
      return {5, rec[1] or '', rec[2], tonumber(rec[3]) or -1}
    end
  end
  -- Not granted: a waiter takes or refreshes its place.
  if not queued and join and member ~= '' then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    queued = true
  end
  local reply
  if not queued then
    reply = {0, holder, pttl, -1, 0, ''}
  else
    if join then
      local at = math.min(math.max(since, now_ms - skew), now_ms + skew)
      redis.call('ZADD', KEYS[3], 'NX', at, member)
      redis.call('ZADD', KEYS[4], now_ms + qlife, member)
      -- Every key redlock writes expires: the queue one entry lifetime
      -- after its last refresh.
      redis.call('PEXPIRE', KEYS[3], qlife)
      redis.call('PEXPIRE', KEYS[4], qlife)
    end
    local first = redis.call('ZRANGE', KEYS[3], 0, 0)[1] or ''
    reply = {0, holder, pttl, redis.call('ZRANK', KEYS[3], member) or -1,
             redis.call('ZCARD', KEYS[3]), first}
  end
  -- With `-n`'s term, a refusal says this server's clock: each answer
  -- bounds when the contender began there (src/lock/record.rs).
  if untaken then
    local t = redis.call('TIME')
    reply[7], reply[8] = t[1], t[2]
  end
  return reply
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
-- The server's clock goes back with every grant: a server whose clock is
-- far from this client's (stepped, restored from a snapshot) may have let
-- a holder's key expire early, and its grant counts towards no quorum
-- (src/lock/vote.rs, `no_vote`).
local time = redis.call('TIME')
local replaced
if record then
  -- The grant record: this grant (server ms, token) and the tick it runs
  -- (or the last tick, carried), with the record it replaces, which a
  -- withdrawal of this grant puts back (withdraw.lua). It lives
  -- `lock::RECORD_LIFE` and, while it holds a tick, until
  -- `lock::TICK_MARGIN` after the tick's end (the numbers below;
  -- src/lock/scripts_tests.rs fails when they differ from record.rs's).
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local cur = redis.call('HMGET', record, 'at', 'tok', 'ts', 'te', 'tt')
  replaced = cur
  local ts, te, tt = cur[3] or '-1', cur[4] or '-1', cur[5] or ''
  if tick_end >= 0 then
    ts, te, tt = string.format('%.0f', tick_start), string.format('%.0f', tick_end), ARGV[1]
  end
  redis.call('HSET', record, 'at', string.format('%.0f', now), 'tok', ARGV[1],
    'ts', ts, 'te', te, 'tt', tt, 'pat', cur[1] or '-1', 'ptok', cur[2] or '',
    'pts', cur[3] or '-1', 'pte', cur[4] or '-1', 'ptt', cur[5] or '')
  -- The schedule stays when a withdrawal puts the record back: a host that
  -- attempted with it exists, whether it won or not.
  if ARGV[4] then
    redis.call('HSET', record, 'sch', ARGV[4])
  end
  redis.call('PEXPIRE', record, math.max(20000, tonumber(te) - now + 60000))
end
-- The record this grant replaced (none for a shared holder).
local pat, ptok = -1, ''
if record then
  pat, ptok = tonumber(replaced[1]) or -1, replaced[2] or ''
end
if proposal < 0 then
  return {1, -1, score, deadline, time[1], time[2], pat, ptok}
end
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local draw = math.min(math.max(proposal, now), now + window)
-- Write the draw and read the counter it replaces in one call (SET ... GET,
-- Redis 6.2 and later; before that, GET then SET). Almost always the draw,
-- a clock reading, is above the old counter; else the counter + 1 is
-- written over it, still inside this script, so nobody sees the draw.
local text = string.format('%.0f', draw)
local old = redis.pcall('SET', KEYS[2], text, 'PX', life, 'GET')
if type(old) == 'table' and old.err then
  old = redis.call('GET', KEYS[2])
  redis.call('SET', KEYS[2], text, 'PX', life)
end
-- A counter that is no number was not written by redlock: put it back (the
-- key's own expiry is lost) and refuse, as for a key of another type.
if old and not tonumber(old) then
  redis.call('SET', KEYS[2], old, 'PX', life)
  return redis.error_reply('NOTREDLOCK ' .. KEYS[2] .. ' holds no number, so it is no fence counter')
end
local fence = draw
if old and tonumber(old) + 1 > draw then
  fence = tonumber(old) + 1
  redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', life)
end
return {1, fence, score, deadline, time[1], time[2], pat, ptok}
