-- Atomic commit: check the version, apply record changes, bump the version, log the change set,
-- append audit events with consecutive ids, and announce the new version.
-- KEYS[1] version, KEYS[2] changes stream, KEYS[3] events stream, KEYS[4] event id sequence,
-- KEYS[5..] collection hashes, named by ARGV[6..] in the same order.
-- ARGV[1] expected version, ARGV[2] changes (JSON array of {c, k, v}), ARGV[3] events (JSON array
-- of event documents without id), ARGV[4] change-log length, ARGV[5] notify channel.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then
  return {0, current}
end
local hashes = {}
for i = 6, #ARGV do
  hashes[ARGV[i]] = KEYS[i - 1]
end
local changes = cjson.decode(ARGV[2])
-- Validate everything before the first write: Redis does not roll back a failed script.
for _, ch in ipairs(changes) do
  if hashes[ch.c] == nil then
    return redis.error_reply('unknown collection ' .. tostring(ch.c))
  end
end
local events = cjson.decode(ARGV[3])
for _, ch in ipairs(changes) do
  if ch.v == nil or ch.v == cjson.null then
    redis.call('HDEL', hashes[ch.c], ch.k)
  else
    redis.call('HSET', hashes[ch.c], ch.k, ch.v)
  end
end
local version = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], version .. '-0', 'changes', ARGV[2])
for _, ev in ipairs(events) do
  local id = redis.call('INCR', KEYS[4])
  redis.call('XADD', KEYS[3], id .. '-0', 'event', '{"id":' .. id .. ',' .. string.sub(ev, 2))
end
redis.call('PUBLISH', ARGV[5], version)
return {1, version}
