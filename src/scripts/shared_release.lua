-- Leave the shared holders (`--shared`): remove this token's entry, and
-- the lock key's marker with the last live entry (else shorten the marker
-- to the latest live entry). Also withdraws a failed shared attempt.
-- KEYS[1]: the lock key; KEYS[2]: the shared holders.
-- ARGV[1]: the holder's token; ARGV[2]: the release channel, or '' to
-- announce nothing (a withdrawal).
-- Returns 1 when the token had a live entry here (and the release was
-- announced on ARGV[2]), 0 otherwise.
if redis.replicate_commands then
  redis.replicate_commands()
end
local marker = 'redlock-shared'
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
local live = score and tonumber(score) > now_ms
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
if redis.call('GET', KEYS[1]) == marker then
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', KEYS[1], KEYS[2])
  else
    local left = math.max(tonumber(last[2]) - now_ms, 1)
    redis.call('PEXPIRE', KEYS[1], left)
    redis.call('PEXPIRE', KEYS[2], left)
  end
end
if live then
  if ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], ARGV[1])
  end
  return 1
end
return 0
