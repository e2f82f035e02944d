-- Compare-and-delete of a failed acquire attempt's vote, without a word to
-- waiters: a withdrawn minority vote is not a release (no holder let go), and
-- announcing it would wake every waiter at once into the same split. A
-- waiter's queue entry that the attempt's grant removed here goes back.
-- With ARGV[4], the same for a shared holder (`--shared`, src/shared.rs): its
-- entry leaves the shared holders, and the lock key's marker goes with the
-- last live entry (else lasts as long as the latest); with a channel in
-- ARGV[4] this is the shared holder's release, announced as release.lua does
-- (announce.lua, in front of this file) when the marker goes (while it
-- stays, no waiter can get in).
-- KEYS[1]: the lock key; KEYS[2], KEYS[3]: the queue's order and deadlines;
-- KEYS[4]: for an exclusive attempt, the grant record (acquire.lua), which
-- goes back to the record the grant replaced while it still names this
-- token; for a shared holder, the shared holders.
-- ARGV[1]: the attempt's token; ARGV[2]: the waiter's queue member, or '' when
-- no entry was removed; ARGV[3]: 'score deadline' of that entry (ms, server
-- time); ARGV[4] (shared only): the release channel, or '' for a withdrawal.
-- Returns 1 when the key (or, shared, a live entry) held the token and was
-- deleted, 0 otherwise. A key of another type fails with WRONGTYPE and is
-- left untouched.
if redis.replicate_commands then
  redis.replicate_commands()
end
-- The server's clock (ms), read only where an entry or a shared holder is
-- involved: a plain withdrawal stays a GET and a DEL.
local now
local shared = ARGV[4] ~= nil
if ARGV[2] ~= '' or shared then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if ARGV[2] ~= '' then
  local score, deadline = string.match(ARGV[3], '^(%d+) (%d+)$')
  local left = tonumber(deadline) - now
  -- An entry already past its deadline stays out, as it would have expired.
  if left > 0 then
    redis.call('ZADD', KEYS[2], 'NX', score, ARGV[2])
    redis.call('ZADD', KEYS[3], 'NX', deadline, ARGV[2])
    -- The queue lives at least as long as the entry put back.
    for _, k in ipairs({KEYS[2], KEYS[3]}) do
      local pttl = redis.call('PTTL', k)
      if pttl == -1 or pttl < left then
        redis.call('PEXPIRE', k, left)
      end
    end
  end
end
if not shared then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  if KEYS[4] then
    -- A withdrawn grant took nobody's turn and ran no tick: the record it
    -- replaced comes back (put_back.lua, in front of this file).
    put_back(KEYS[4], ARGV[1])
  end
  return redis.call('DEL', KEYS[1])
end
local score = redis.call('ZSCORE', KEYS[4], ARGV[1])
local live = score and tonumber(score) > now
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if redis.call('GET', KEYS[1]) ~= 'redlock-shared' then
  return live and 1 or 0
end
local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
if #last > 0 then
  -- Never below the latest live entry.
  local left = math.max(tonumber(last[2]) - now, 1)
  redis.call('PEXPIRE', KEYS[1], left)
  redis.call('PEXPIRE', KEYS[4], left)
  return live and 1 or 0
end
redis.call('DEL', KEYS[1], KEYS[4])
if live and ARGV[4] ~= '' then
  announce(ARGV[4], KEYS[2], KEYS[3], ARGV[1])
end
return live and 1 or 0
