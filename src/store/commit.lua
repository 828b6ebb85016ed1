-- Atomic commit: check the position (version and the id of the commit that made it) or,
-- failing that, whether the batch may be committed on top of what was written since (a
-- rebase, see `store::Rebase`); apply record changes, bump the version, record the new commit
-- id and the commit marks, log the change set, append audit events with consecutive ids,
-- queue the addon deliveries of the events, and announce the new position ('<version> <head>
-- <previous head>', followed by ' <changes>' when small enough: see `store::announced`).
-- KEYS[1] version, KEYS[2] changes stream, KEYS[3] events stream, KEYS[4] event id sequence,
-- KEYS[5] head (latest commit id), KEYS[6] deliveries stream, KEYS[7] commit marks,
-- KEYS[8 .. 7+n] the n collection hashes, named by ARGV[12..] in order, then the per-toggle
-- event index lists and the per-addon delivery logs the events refer to.
-- ARGV[1] expected version ('-1': no fast path, rebase only), ARGV[2] expected head ('0' for
-- a store never written), ARGV[3] changes (JSON array of {c, k, v}), ARGV[4] events (JSON
-- array of [event document without id, KEYS index of its toggle's index list or 0, event
-- kind, deliveries as [addon id, KEYS index of the addon's log hash, KEYS index of its
-- recent set, the write's W3C traceparent or '']]), ARGV[5] change-log length, ARGV[6]
-- notify channel, ARGV[7] this commit's id, ARGV[8] '2' to log and announce the changes, '1'
-- to log them only, '0' to log them as too large ('null': replicas reload everything), ARGV[9]
-- now in epoch ms, ARGV[10] now in
-- RFC 3339, ARGV[11] the rebase terms ('' for none): JSON {"seen": [version, head], "own":
-- [version, ...] oldest first, "own_head": head of the newest own commit or '', "toggles":
-- [name, ...]}, every number as a string.
-- Returns {committed 0/1, version, head, rebased 0/1}.
local marks = KEYS[7]
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local head = redis.call('GET', KEYS[5]) or '0'

-- The id of the commit that made `version`, from the change log (nil once trimmed).
local function logged_head(version)
  local entry = redis.call('XRANGE', KEYS[2], version .. '-0', version .. '-0')
  if entry[1] == nil then
    return nil
  end
  return entry[1][2][2]
end

-- Whether the batch comes out the same on top of everything written since `terms.seen`.
local function may_rebase(terms)
  local seen = tonumber(terms.seen[1])
  -- Every commit since `seen` kept the marks.
  if tonumber(redis.call('HGET', marks, 'tracked') or '-1') ~= current then
    return false
  end
  if tonumber(redis.call('HGET', marks, 'tracked_from') or '0') > seen + 1 then
    return false
  end
  -- No record outside the toggles changed.
  if tonumber(redis.call('HGET', marks, 'shared') or '0') > seen then
    return false
  end
  -- `seen` and the replica's own commits are part of this store's history. History is
  -- linear (a failover loses a suffix of it, a restore replaces it), so the newest own commit
  -- being there means the older ones are.
  if logged_head(seen) ~= terms.seen[2] then
    return false
  end
  if #terms.own > 0 and logged_head(terms.own[#terms.own]) ~= terms.own_head then
    return false
  end
  local own = {}
  for _, version in ipairs(terms.own) do
    own[tonumber(version)] = true
  end
  -- Nobody else wrote the batch's toggles.
  for _, name in ipairs(terms.toggles) do
    local written = tonumber(redis.call('HGET', marks, 't/' .. name) or '0')
    if written > seen and not own[written] then
      return false
    end
  end
  return true
end

local rebased = 0
if current ~= tonumber(ARGV[1]) or head ~= ARGV[2] then
  if ARGV[11] == '' or not may_rebase(cjson.decode(ARGV[11])) then
    return {0, current, head, 0}
  end
  rebased = 1
end
-- Validate everything before the first write: Redis does not roll back a failed script.
local hashes = {}
for i = 12, #ARGV do
  hashes[ARGV[i]] = KEYS[i - 4]
end
local marks_type = redis.call('TYPE', marks).ok
if marks_type ~= 'hash' and marks_type ~= 'none' then
  return redis.error_reply('FLAGPOLE_INCONSISTENT commit marks are not a hash')
end
local changes = cjson.decode(ARGV[3])
for _, ch in ipairs(changes) do
  if hashes[ch.c] == nil then
    return redis.error_reply('unknown collection ' .. tostring(ch.c))
  end
end
local events = cjson.decode(ARGV[4])
local function top_id(stream)
  local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  if top[1] == nil then
    return 0
  end
  return tonumber(string.match(top[1][1], '^(%d+)'))
end
-- A version or event counter that went back (lost key, eviction, partial restore) would make
-- the XADDs below fail after the records were written.
if top_id(KEYS[2]) > current then
  return redis.error_reply('FLAGPOLE_INCONSISTENT change log is ahead of the version counter')
end
if #events > 0 and top_id(KEYS[3]) > tonumber(redis.call('GET', KEYS[4]) or '0') then
  return redis.error_reply('FLAGPOLE_INCONSISTENT audit log is ahead of the event id counter')
end
for _, ch in ipairs(changes) do
  if ch.v == nil or ch.v == cjson.null then
    redis.call('HDEL', hashes[ch.c], ch.k)
  else
    redis.call('HSET', hashes[ch.c], ch.k, ch.v)
  end
end
local version = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[5], ARGV[7])
local shared = false
for _, ch in ipairs(changes) do
  if ch.c == 'features' or ch.c == 'archive' then
    redis.call('HSET', marks, 't/' .. ch.k, version)
  else
    shared = true
  end
end
if shared then
  redis.call('HSET', marks, 'shared', version)
end
if tonumber(redis.call('HGET', marks, 'tracked') or '-1') ~= current then
  redis.call('HSET', marks, 'tracked_from', version)
end
redis.call('HSET', marks, 'tracked', version)
local logged = ARGV[3]
if ARGV[8] == '0' then
  logged = 'null'
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], version .. '-0', 'head', ARGV[7], 'changes', logged)
for _, ev in ipairs(events) do
  local id = redis.call('INCR', KEYS[4])
  redis.call('XADD', KEYS[3], id .. '-0', 'event', '{"id":' .. id .. ',' .. string.sub(ev[1], 2))
  if ev[2] > 0 then
    redis.call('RPUSH', KEYS[ev[2]], id)
  end
  -- Built by hand: cjson would write large integers in exponent form.
  for _, d in ipairs(ev[4]) do
    local delivery = id .. '.' .. d[1]
    local common = '"eventId":' .. id .. ',"addonId":' .. d[1] .. ',"type":"' .. ev[3] .. '"'
    local trace = ''
    if d[4] ~= nil and d[4] ~= '' then
      trace = ',"traceparent":"' .. d[4] .. '"'
    end
    redis.call('XADD', KEYS[6], '*', 'job', '{"delivery":"' .. delivery .. '","event":' .. id
      .. ',"addon":' .. d[1] .. ',"type":"' .. ev[3] .. '","version":' .. version
      .. ',"attempts":0,"sent":0,"queued":' .. ARGV[9] .. trace .. '}')
    redis.call('HSET', KEYS[d[2]], delivery, '{"id":"' .. delivery .. '",' .. common
      .. ',"status":"queued","attempts":0,"createdAt":"' .. ARGV[10] .. '","updatedAt":"'
      .. ARGV[10] .. '"}')
    redis.call('ZADD', KEYS[d[3]], id, delivery)
  end
end
local announcement = version .. ' ' .. ARGV[7] .. ' ' .. head
if ARGV[8] == '2' then
  announcement = announcement .. ' ' .. ARGV[3]
end
redis.call('PUBLISH', ARGV[6], announcement)
return {1, version, ARGV[7], rebased}
