-- Trims one application of the usage registry. KEYS: 1 applications, 2 the application's hash,
-- 3 instances (last seen), 4 first seen, 5 ips, 6 registrations, 7 polls, 8 seen toggles.
-- ARGV[1]: cutoff (epoch ms; older is forgotten), ARGV[2]: the application's name.
-- Scores are checked in the script itself, so a replica that flushes fresh data for the same
-- application or instance meanwhile never has it deleted. Returns the instances removed (at
-- most 1000 per call; the caller repeats), or -1 when the whole application was.
local seen = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not seen or tonumber(seen) < tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
  redis.call('ZREM', KEYS[1], ARGV[2])
  return -1
end
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 1000)
if #old > 0 then
  redis.call('HDEL', KEYS[5], unpack(old))
  redis.call('HDEL', KEYS[6], unpack(old))
  redis.call('HDEL', KEYS[7], unpack(old))
  redis.call('ZREM', KEYS[4], unpack(old))
  redis.call('ZREM', KEYS[3], unpack(old))
end
redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', '(' .. ARGV[1])
return #old
