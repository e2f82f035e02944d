-- Compare-and-raise the fencing counter, so that a quorum holds at least the
-- fence just handed out and every later acquisition draws a larger one.
-- KEYS[1]: the fencing counter (redlock:fence:KEY).
-- ARGV[1]: the fence to raise it to.
-- Returns the counter after the call (never lowered).
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if wanted > current then
  redis.call('SET', KEYS[1], ARGV[1])
  return wanted
end
return current
