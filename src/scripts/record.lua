-- Record one finished run at the head of the lock's history, keep the
-- newest entries only, and push the history's expiry out to the retention.
-- KEYS[1]: the history list (newest first).
-- ARGV[1]: the entry (a JSON object); ARGV[2]: how many entries to keep;
-- ARGV[3]: the retention in milliseconds (the list expires that long after
-- the last run recorded).
-- Returns 1. A history key of another type fails with WRONGTYPE.
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
