-- Shared token buckets of the rate limiter: each replica reports what it let through per key
-- since its last report; the bucket refills at `rate` per second up to `burst` (by Redis'
-- clock, the same for every replica), is charged, and answers its tokens and how many
-- replicas reported to it lately (each may spend its share of the tokens until it reports
-- again).
-- KEYS: the buckets. ARGV[1] rate (tokens per second), ARGV[2] burst, ARGV[3] the reporting
-- replica's id, ARGV[4] how long a replica counts as reporting (ms), ARGV[5..] the tokens each
-- key used since the last report, in KEYS order. Returns tokens and reporters, per key.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1]) / 1000
local burst = tonumber(ARGV[2])
local window = tonumber(ARGV[4])
local ttl = math.max(math.ceil(burst / rate), window) + 1000
local out = {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HMGET', key, 't', 'v')
  local tokens = burst
  if state[1] then
    tokens = math.min(burst, tonumber(state[2]) + (now - tonumber(state[1])) * rate)
  end
  tokens = math.max(-burst, tokens - tonumber(ARGV[i + 4]))
  redis.call('HSET', key, 't', now, 'v', tostring(tokens), 'r:' .. ARGV[3], now)
  local fields = redis.call('HGETALL', key)
  local reporters = 0
  for j = 1, #fields, 2 do
    if string.sub(fields[j], 1, 2) == 'r:' then
      if now - tonumber(fields[j + 1]) <= window then
        reporters = reporters + 1
      else
        redis.call('HDEL', key, fields[j])
      end
    end
  end
  redis.call('PEXPIRE', key, ttl)
  out[2 * i - 1] = tostring(tokens)
  out[2 * i] = reporters
end
return out
