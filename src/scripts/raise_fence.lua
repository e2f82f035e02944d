-- Compare-and-raise the fencing counter, so that a quorum of the servers
-- holding this token has exactly the fence just handed out: every later
-- acquisition's quorum shares one of them, and status reads it back there.
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter; KEYS[3], only for a
-- shared holder (`--shared`): the shared holders, where its entry is.
-- ARGV[1]: the holder's token; ARGV[2]: the fence; ARGV[3]: the counter's
-- lifetime in milliseconds.
-- Returns the counter after the call (never lowered), or -1 when the token
-- does not hold the lock here (nothing is written then). A lock key of
-- another type fails with WRONGTYPE.
if KEYS[3] then
  if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    return -1
  end
elseif redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
local wanted = tonumber(ARGV[2])
if wanted > current then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return wanted
end
return current
