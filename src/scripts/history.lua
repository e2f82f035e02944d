-- Read the lock's history and its skip counter in one atomic step.
-- KEYS[1]: the history list (newest first); KEYS[2]: the skips hash.
-- ARGV[1]: how many entries to read, from the newest.
-- Returns {entries (JSON strings, newest first), skips (HGETALL's flat
-- field/value list, empty when none)}. Reads only.
return {redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1), redis.call('HGETALL', KEYS[2])}
