-- Moves delivery jobs whose retry is due back into the deliveries stream, atomically.
-- KEYS[1] retries set, KEYS[2] deliveries stream. ARGV[1] now (epoch ms), ARGV[2] at most
-- this many. Returns how many moved.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, job in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'job', job)
  redis.call('ZREM', KEYS[1], job)
end
return #due
