-- Compare-and-delete of a failed acquire attempt's vote, without a word to
-- waiters: a withdrawn minority vote is not a release (no holder let go), and
-- announcing it would wake every waiter at once into the same split. A
-- waiter's queue entry that the attempt's grant removed here goes back.
-- KEYS[1]: the lock key; KEYS[2], KEYS[3]: the queue's order and deadlines.
-- ARGV[1]: the attempt's token; ARGV[2]: the waiter's queue member, or '' when
-- no entry was removed; ARGV[3]: 'score deadline' of that entry (ms, server
-- time).
-- Returns 1 when the key held the token and was deleted, 0 otherwise. A key of
-- another type fails with WRONGTYPE and is left untouched.
if ARGV[2] ~= '' then
  local score, deadline = string.match(ARGV[3], '^(%d+) (%d+)$')
  local t = redis.call('TIME')
  local left = tonumber(deadline) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
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
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
