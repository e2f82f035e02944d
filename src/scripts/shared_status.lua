-- Read the shared holders of a lock (`--shared`) in one atomic step.
-- KEYS[1]: the lock key; KEYS[2]: the shared holders.
-- Returns {marker present (1/0), token, ms left, token, ms left, ...} with
-- the live entries only. Reads only.
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local out = {redis.call('GET', KEYS[1]) == 'redlock-shared' and 1 or 0}
local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now_ms, '+inf', 'WITHSCORES')
for i = 1, #entries, 2 do
  out[#out + 1] = entries[i]
  out[#out + 1] = math.floor(tonumber(entries[i + 1]) - now_ms)
end
return out
