-- The committer lease (see `store::committer_lease`). KEYS[1] the lease; ARGV[1] this
-- replica's claim ('<token> <url>'), ARGV[2] '1' to take or renew the lease, '0' to give it
-- up, ARGV[3] the lease's time to live in ms. Returns the holder's claim afterwards, or false.
local holder = redis.call('GET', KEYS[1])
if ARGV[2] == '1' then
  if not holder or holder == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
    return ARGV[1]
  end
  return holder
end
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return false
end
return holder
