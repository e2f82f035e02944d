-- Putting back the grant record (src/lock/record.rs) that a grant replaced,
-- shared by withdraw.lua (a withdrawn attempt) and release.lua (the release
-- of a vote that landed after its round was won): build.rs puts this file in
-- front of each. put_back(record, token): while the record names `token`,
-- the record it replaced comes back (or none, when there was none). Best
-- effort where that needs memory (redis.pcall): a server out of memory keeps
-- the newer record, which makes a `-n` busy, the safe side, and the release or
-- withdrawal still goes through.
local function put_back(record, token)
  local rec = redis.call('HMGET', record, 'tok', 'pat', 'ptok', 'pts', 'pte', 'ptt')
  if rec[1] ~= token then
    return
  end
  if rec[2] and rec[2] ~= '-1' then
    redis.pcall('HSET', record, 'at', rec[2], 'tok', rec[3], 'ts', rec[4], 'te', rec[5],
      'tt', rec[6], 'pat', '-1', 'ptok', '', 'pts', '-1', 'pte', '-1', 'ptt', '')
  else
    redis.call('DEL', record)
  end
end
