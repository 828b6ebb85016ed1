-- Atomic commit: check the position (version and the id of the commit that made it) or,
-- failing that, whether the batch may be committed on top of what was written since (a
-- rebase, see `store::Rebase`); apply record changes, bump the version, record the new commit
-- id and the commit marks, log the change set, append audit events with consecutive ids,
-- queue the addon deliveries of the events, and announce the new position ('<version> <head>
-- <previous head>', followed by ' <changes>' when small enough: see `store::announced`).
-- KEYS[1] version, KEYS[2] changes stream, KEYS[3] events stream, KEYS[4] event id sequence,
-- KEYS[5] head (latest commit id), KEYS[6] deliveries stream, KEYS[7] commit marks,
-- KEYS[8] stream log, KEYS[9 .. 8+n] the n collection hashes, named in order by the last n arguments (after the
-- events' arguments, below), then the per-toggle event index lists and the per-addon delivery
-- logs and recent sets the events refer to.
-- ARGV[1] expected version ('-1': no fast path, rebase only), ARGV[2] expected head ('0' for
-- a store never written), ARGV[3] changes (JSON array of {c, k, v}), ARGV[4] the number of
-- events e, ARGV[5] change-log length, ARGV[6] notify channel, ARGV[7] this commit's id,
-- ARGV[8] '2' to log and announce the changes, '1' to log them only, '0' to log them as too
-- large ('null': replicas reload everything), ARGV[9] now in epoch ms, ARGV[10] now in
-- RFC 3339, ARGV[11] the rebase terms ('' for none): JSON {"seen": [version, head], "own":
-- [version, ...] oldest first, "own_head": head of the newest own commit or '', "toggles":
-- [name, ...]}, every number as a string; ARGV[12] what the commit touched (the stream-log
-- entry, JSON), ARGV[13] the stream log's length and ARGV[14] its age in ms (it is trimmed to
-- both); then four arguments per event, ARGV[15 .. 14+4e]:
-- its document without the id and without its opening brace, the KEYS index of its toggle's
-- index list or '0', its kind, and its deliveries ('' for none) as a JSON array of [addon id,
-- KEYS index of the addon's log hash, KEYS index of its recent set, the write's W3C
-- traceparent or '']; then the n collection names. (Separate arguments rather than one JSON
-- array of events: decoding that, and cutting each document out of it, took about a tenth of
-- the script's time.)
-- Returns {committed 0/1, version, head, rebased 0/1, previous head}: the head before this
-- commit ('0' for a store never written before, and when nothing was committed).
-- Each redis.call costs about as much as a small command itself: calls are batched (one HSET
-- per hash, one INCRBY for the event ids, one RPUSH per toggle) rather than made per record.
local marks = KEYS[7]
local counters = redis.call('MGET', KEYS[1], KEYS[5], KEYS[4])
local current = tonumber(counters[1] or '0')
local head = counters[2] or '0'
local event_seq = tonumber(counters[3] or '0')

-- The commit marks keep the id of the commit that made a version in slot 'h/<version mod
-- HEAD_SLOTS>' as '<version> <head>': a change-log entry holds the whole change set, and
-- reading one makes Lua hash every byte of it.
local HEAD_SLOTS = 2048

-- The id of the commit that made `version` (nil once forgotten).
local function logged_head(version)
  version = tonumber(version)
  local slot = redis.call('HGET', marks, 'h/' .. (version % HEAD_SLOTS))
  if slot then
    local at, id = string.match(slot, '^(%d+) (%d+)$')
    if tonumber(at) == version then
      return id
    end
  end
  -- Older than the slots, or committed by an older release: from the change log.
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
    return {0, current, head, 0, '0'}
  end
  rebased = 1
end
-- Validate everything before the first write: Redis does not roll back a failed script.
local event_count = tonumber(ARGV[4])
-- Where the arguments of event i (0-based) start.
local function event_args(i)
  return 15 + 4 * i
end
if event_count == nil or event_count < 0 or event_count % 1 ~= 0
    or event_args(event_count) > #ARGV then
  return redis.error_reply('the number of events does not match the arguments')
end
local collections_from = event_args(event_count)
local hashes = {}
for i = collections_from, #ARGV do
  hashes[ARGV[i]] = KEYS[9 + i - collections_from]
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
local slots, deliveries = {}, {}
for i = 0, event_count - 1 do
  local at = event_args(i)
  slots[i] = tonumber(ARGV[at + 1])
  if slots[i] == nil then
    return redis.error_reply('an event names no index list slot')
  end
  if ARGV[at + 3] ~= '' then
    deliveries[i] = cjson.decode(ARGV[at + 3])
  end
end
-- Whether `stream` holds an entry past id `counter` (asked for the range only: its entries
-- are not read, and none comes back when all is well).
local function ahead_of(stream, counter)
  return #redis.call('XRANGE', stream, (counter + 1) .. '-0', '+', 'COUNT', 1) > 0
end
-- A version or event counter that went back (lost key, eviction, partial restore) would make
-- the XADDs below fail after the records were written.
if ahead_of(KEYS[2], current) then
  return redis.error_reply('FLAGPOLE_INCONSISTENT change log is ahead of the version counter')
end
if ahead_of(KEYS[8], current) then
  return redis.error_reply('FLAGPOLE_INCONSISTENT stream log is ahead of the version counter')
end
if event_count > 0 and ahead_of(KEYS[3], event_seq) then
  return redis.error_reply('FLAGPOLE_INCONSISTENT audit log is ahead of the event id counter')
end
-- redis.call(command, key, items...) in slices of at most 1000 * width items (Lua passes a
-- few thousand values to one call at most; width keeps field-value pairs together).
local function call_sliced(command, key, items, width)
  local step = 1000 * width
  for first = 1, #items, step do
    redis.call(command, key, unpack(items, first, math.min(first + step - 1, #items)))
  end
end
-- The last change of each record wins; then one HSET and one HDEL per hash.
local last = {}
local order = {}
for _, ch in ipairs(changes) do
  local id = ch.c .. '\0' .. ch.k
  if last[id] == nil then
    order[#order + 1] = id
  end
  last[id] = ch
end
local sets, deletes = {}, {}
for _, id in ipairs(order) do
  local ch = last[id]
  local hash = hashes[ch.c]
  if ch.v == nil or ch.v == cjson.null then
    deletes[hash] = deletes[hash] or {}
    table.insert(deletes[hash], ch.k)
  else
    sets[hash] = sets[hash] or {}
    table.insert(sets[hash], ch.k)
    table.insert(sets[hash], ch.v)
  end
end
for hash, fields in pairs(deletes) do
  call_sliced('HDEL', hash, fields, 1)
end
for hash, fields in pairs(sets) do
  call_sliced('HSET', hash, fields, 2)
end
local version = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[5], ARGV[7])
local marked = {}
local shared = false
for _, id in ipairs(order) do
  local ch = last[id]
  if ch.c == 'features' or ch.c == 'archive' then
    table.insert(marked, 't/' .. ch.k)
    table.insert(marked, version)
  else
    shared = true
  end
end
if shared then
  table.insert(marked, 'shared')
  table.insert(marked, version)
end
if tonumber(redis.call('HGET', marks, 'tracked') or '-1') ~= current then
  table.insert(marked, 'tracked_from')
  table.insert(marked, version)
end
table.insert(marked, 'tracked')
table.insert(marked, version)
table.insert(marked, 'h/' .. (version % HEAD_SLOTS))
table.insert(marked, version .. ' ' .. ARGV[7])
call_sliced('HSET', marks, marked, 2)
local logged = ARGV[3]
if ARGV[8] == '0' then
  logged = 'null'
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], version .. '-0', 'head', ARGV[7], 'changes', logged)
-- The stream log: one entry per version, trimmed by length and by age (a few of the oldest
-- entries per commit: each commit adds one).
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[13], version .. '-0', 'at', ARGV[9], 'touched', ARGV[12])
local cutoff = tonumber(ARGV[9]) - tonumber(ARGV[14])
local aged = nil
for _, entry in ipairs(redis.call('XRANGE', KEYS[8], '-', '+', 'COUNT', 8)) do
  if tonumber(entry[2][2]) >= cutoff then
    break
  end
  aged = entry[1]
end
if aged ~= nil then
  local aged_version = tonumber(string.match(aged, '^(%d+)-'))
  redis.call('XTRIM', KEYS[8], 'MINID', (aged_version + 1) .. '-0')
end
local indexed = {}
local indexes = {}
if event_count > 0 then
  event_seq = redis.call('INCRBY', KEYS[4], event_count) - event_count
end
for i = 0, event_count - 1 do
  local at = event_args(i)
  local kind = ARGV[at + 2]
  event_seq = event_seq + 1
  local id = event_seq
  redis.call('XADD', KEYS[3], id .. '-0', 'event', '{"id":' .. id .. ',' .. ARGV[at])
  local slot = slots[i]
  if slot > 0 then
    if indexed[slot] == nil then
      indexed[slot] = {}
      indexes[#indexes + 1] = slot
    end
    table.insert(indexed[slot], id)
  end
  -- Built by hand: cjson would write large integers in exponent form.
  for _, d in ipairs(deliveries[i] or {}) do
    local delivery = id .. '.' .. d[1]
    local common = '"eventId":' .. id .. ',"addonId":' .. d[1] .. ',"type":"' .. kind .. '"'
    local trace = ''
    if d[4] ~= nil and d[4] ~= '' then
      trace = ',"traceparent":"' .. d[4] .. '"'
    end
    redis.call('XADD', KEYS[6], '*', 'job', '{"delivery":"' .. delivery .. '","event":' .. id
      .. ',"addon":' .. d[1] .. ',"type":"' .. kind .. '","version":' .. version
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
for _, slot in ipairs(indexes) do
  call_sliced('RPUSH', KEYS[slot], indexed[slot], 1)
end
redis.call('PUBLISH', ARGV[6], announcement)
return {1, version, ARGV[7], rebased, head}
