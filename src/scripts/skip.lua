-- Count one skip (a run that did not run its command) in O(1): a counter,
-- the time of the first skip it counts, and the last skip's facts; no entry
-- per skip, so a thousand hosts per tick cost a thousand HINCRBYs. Under a
-- tick (--once-per), also what the skips of that tick saw, for `check`.
-- KEYS[1]: the skips hash (fields count, since, at, host, holder; per tick
-- `t<start ms>:<kind>`, each a count; `tracked`, when the first per-tick
-- field was written; `pruned`, the newest tick start whose fields were
-- dropped).
-- ARGV[1]: the skipping host; ARGV[2]: the time, in ms since the epoch;
-- ARGV[3]: who held the lock, one line; ARGV[4]: the retention in
-- milliseconds (the hash expires that long after the last skip);
-- ARGV[5]: the kind: `ran` (the tick ran or runs elsewhere), `busy` (held
-- by another), `unavailable` (no quorum answered; not counted as a skip),
-- `paused` (a freeze held the key past the tick's end; the tick also keeps
-- ARGV[3], the freeze's line, in `t<start ms>:freeze`), `elsewhere` (the
-- key's record names another schedule; not counted as a skip);
-- ARGV[6]: the tick's start in ms, or empty; ARGV[7]: how many ticks keep
-- their fields (the oldest go first, once a new tick passes the bound).
-- Returns the count after this skip. A key of another type fails with WRONGTYPE.
local count = 0
if ARGV[5] ~= 'unavailable' and ARGV[5] ~= 'elsewhere' then
  count = redis.call('HINCRBY', KEYS[1], 'count', 1)
  redis.call('HSETNX', KEYS[1], 'since', ARGV[2])
  redis.call('HSET', KEYS[1], 'at', ARGV[2], 'host', ARGV[1], 'holder', ARGV[3])
end
if ARGV[6] ~= '' then
  redis.call('HSETNX', KEYS[1], 'tracked', ARGV[2])
  local first = redis.call('HINCRBY', KEYS[1], 't' .. ARGV[6] .. ':' .. ARGV[5], 1)
  if ARGV[5] == 'paused' then
    redis.call('HSET', KEYS[1], 't' .. ARGV[6] .. ':freeze', ARGV[3])
  end
  -- Only a tick's first skip of a kind can pass the bound: the scan below
  -- runs once per tick and kind, not once per host.
  local keep = tonumber(ARGV[7])
  if first == 1 and redis.call('HLEN', KEYS[1]) > 6 * keep + 8 then
    local ticks, seen = {}, {}
    for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
      local start = string.match(field, '^t(%d+):')
      if start and not seen[start] then
        seen[start] = true
        table.insert(ticks, start)
      end
    end
    table.sort(ticks, function(a, b) return tonumber(a) < tonumber(b) end)
    local pruned = nil
    for i = 1, #ticks - keep do
      for _, kind in ipairs({'ran', 'busy', 'unavailable', 'paused', 'freeze', 'elsewhere'}) do
        redis.call('HDEL', KEYS[1], 't' .. ticks[i] .. ':' .. kind)
      end
      pruned = ticks[i]
    end
    if pruned then
      local before = redis.call('HGET', KEYS[1], 'pruned') or '0'
      if tonumber(pruned) > tonumber(before) then
        redis.call('HSET', KEYS[1], 'pruned', pruned)
      end
    end
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return count
