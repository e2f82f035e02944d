-- Read the lock and its fencing counter in one atomic step.
-- KEYS[1]: the lock key; KEYS[2]: its fencing counter.
-- Returns {value or nil, pttl, counter or nil}: pttl is -2 when the key is
-- absent and -1 when it has no expiry. A key of another type fails with
-- WRONGTYPE. Reads only: status never changes a key.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
