-- Atomic commit: check the position (epoch and version), apply record changes, bump the
-- version, log the change set, append audit events with consecutive ids, and announce the new
-- version. A store without an epoch (new, or flushed) gets the fresh one from ARGV[7].
-- KEYS[1] version, KEYS[2] changes stream, KEYS[3] events stream, KEYS[4] event id sequence,
-- KEYS[5] epoch, KEYS[6..] collection hashes, named by ARGV[8..] in the same order.
-- ARGV[1] expected version, ARGV[2] expected epoch ('0' for none), ARGV[3] changes (JSON array
-- of {c, k, v}), ARGV[4] events (JSON array of event documents without id), ARGV[5] change-log
-- length, ARGV[6] notify channel, ARGV[7] fresh epoch.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local epoch = redis.call('GET', KEYS[5]) or '0'
if current ~= tonumber(ARGV[1]) or epoch ~= ARGV[2] then
  return {0, current, epoch}
end
local hashes = {}
for i = 8, #ARGV do
  hashes[ARGV[i]] = KEYS[i - 2]
end
local changes = cjson.decode(ARGV[3])
-- Validate everything before the first write: Redis does not roll back a failed script.
for _, ch in ipairs(changes) do
  if hashes[ch.c] == nil then
    return redis.error_reply('unknown collection ' .. tostring(ch.c))
  end
end
local events = cjson.decode(ARGV[4])
if epoch == '0' then
  epoch = ARGV[7]
  redis.call('SET', KEYS[5], epoch)
end
for _, ch in ipairs(changes) do
  if ch.v == nil or ch.v == cjson.null then
    redis.call('HDEL', hashes[ch.c], ch.k)
  else
    redis.call('HSET', hashes[ch.c], ch.k, ch.v)
  end
end
local version = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], version .. '-0', 'changes', ARGV[3])
for _, ev in ipairs(events) do
  local id = redis.call('INCR', KEYS[4])
  redis.call('XADD', KEYS[3], id .. '-0', 'event', '{"id":' .. id .. ',' .. string.sub(ev, 2))
end
redis.call('PUBLISH', ARGV[6], version)
return {1, version, epoch}
