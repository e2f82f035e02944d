-- Compare-and-raise the fencing counter for a shared holder (as
-- raise_fence.lua, comparing the holder's live entry instead of the key).
-- KEYS[1]: the shared holders; KEYS[2]: the fencing counter.
-- ARGV[1]: the holder's token; ARGV[2]: the fence; ARGV[3]: the counter's
-- lifetime in milliseconds.
-- Returns the counter after the call (never lowered), or -1 when the
-- token has no entry here (nothing is written then).
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
local wanted = tonumber(ARGV[2])
if wanted > current then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return wanted
end
return current
