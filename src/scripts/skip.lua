-- Count one skip (a run that found the lock busy) in O(1): a counter, the
-- time of the first skip it counts, and the last skip's facts; no entry
-- per skip, so a thousand hosts per tick cost a thousand HINCRBYs.
-- KEYS[1]: the skips hash (fields count, since, at, host, holder).
-- ARGV[1]: the skipping host; ARGV[2]: the time, in ms since the epoch;
-- ARGV[3]: who held the lock, one line; ARGV[4]: the retention in
-- milliseconds (the hash expires that long after the last skip).
-- Returns the count after this skip. A key of another type fails with WRONGTYPE.
local count = redis.call('HINCRBY', KEYS[1], 'count', 1)
redis.call('HSETNX', KEYS[1], 'since', ARGV[2])
redis.call('HSET', KEYS[1], 'at', ARGV[2], 'host', ARGV[1], 'holder', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return count
