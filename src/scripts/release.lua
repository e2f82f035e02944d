-- Compare-and-delete: remove the key only while this token holds it, and
-- tell waiters at once whose turn it is.
-- KEYS[1]: the lock key; KEYS[2], KEYS[3]: the wait queue's order and
-- deadlines (src/queue.rs); KEYS[4], only for the release of a vote that
-- landed after its round was won: the grant record, which goes back to the
-- record that vote replaced while it still names the token (put_back.lua, in
-- front of this file; why: src/lock/mod.rs, `Call::on`).
-- ARGV[1]: the holder's token (for release --force, the value just read
-- there); ARGV[2]: the release channel of the key.
-- Returns 1 when the key was deleted, 0 when it is absent or held by another
-- value. A deletion is announced on ARGV[2] (announce.lua, in front of this
-- file). A key of another type fails with WRONGTYPE and is left untouched.
-- The marker of shared holders (src/shared.rs) is no token: never touched
-- as one.
if ARGV[1] ~= 'redlock-shared' and redis.call('GET', KEYS[1]) == ARGV[1] then
  if KEYS[4] then
    put_back(KEYS[4], ARGV[1])
  end
  redis.call('DEL', KEYS[1])
  announce(ARGV[2], KEYS[2], KEYS[3], ARGV[1])
  return 1
end
return 0
