-- Settles a delivery job atomically: acknowledge and delete its stream entry, queue its retry
-- (or its deferral) or its dead letter, and write its record into the addon's log (trimmed to
-- the log length). Does nothing, returning 0, when the entry is no longer pending in the
-- group (another consumer claimed and settled it): a retry is never queued twice. A job whose
-- addon was deleted meanwhile only leaves the stream: nothing of a deleted addon is written.
-- KEYS[1] deliveries stream, KEYS[2] retries set, KEYS[3] the addon's dead-letter stream,
-- KEYS[4] the addon's log hash, KEYS[5] the addon's recent set, KEYS[6] the addon's dead-letter
-- index (delivery id → dead-letter entry id), KEYS[7] the addon configurations hash.
-- ARGV[1] group, ARGV[2] entry id, ARGV[3] outcome (delivered, retry, defer, dead, dropped),
-- ARGV[4] the job's JSON (retry, defer, dead), ARGV[5] due epoch ms (retry, defer), ARGV[6] the
-- record's JSON or '' for none, ARGV[7] delivery id, ARGV[8] event id, ARGV[9] error (dead),
-- ARGV[10] now in RFC 3339, ARGV[11] log length, ARGV[12] the addon's id.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('HEXISTS', KEYS[7], ARGV[12]) == 0 then
  return 1
end
local outcome = ARGV[3]
if outcome == 'retry' or outcome == 'defer' then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
elseif outcome == 'dead' then
  local entry = redis.call('XADD', KEYS[3], '*', 'job', ARGV[4], 'error', ARGV[9], 'at', ARGV[10])
  redis.call('HSET', KEYS[6], ARGV[7], entry)
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[7], ARGV[6])
  redis.call('ZADD', KEYS[5], ARGV[8], ARGV[7])
  local excess = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[11])
  if excess > 0 then
    local old = redis.call('ZPOPMIN', KEYS[5], excess)
    for i = 1, #old, 2 do
      redis.call('HDEL', KEYS[4], old[i])
    end
  end
end
return 1
