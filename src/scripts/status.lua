-- Read the lock in one atomic step.
-- KEYS[1]: the lock key.
-- Returns {value or nil, pttl}: pttl is -2 when the key is absent and -1
-- when it has no expiry. A key of another type fails with WRONGTYPE.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
