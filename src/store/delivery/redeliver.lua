-- Queues a delivery again: a dead letter (deleted from the dead-letter stream) or a delivery
-- whose record says it is settled (delivered or dropped). Returns 1 when queued, 0 when it is
-- pending already (queued, retrying, or the dead letter was redelivered meanwhile), -1 when
-- the delivery is unknown.
-- KEYS[1] the addon's dead-letter stream, KEYS[2] deliveries stream, KEYS[3] the addon's log
-- hash, KEYS[4] the addon's recent set, KEYS[5] the addon's dead-letter index.
-- ARGV[1] dead-letter entry id or '', ARGV[2] the job's JSON, ARGV[3] delivery id, ARGV[4] the
-- record's JSON, ARGV[5] event id.
if ARGV[1] ~= '' then
  if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then
    return 0
  end
  redis.call('HDEL', KEYS[5], ARGV[3])
else
  local raw = redis.call('HGET', KEYS[3], ARGV[3])
  if not raw then
    return -1
  end
  local status = cjson.decode(raw).status
  if status ~= 'delivered' and status ~= 'dropped' then
    return 0
  end
end
redis.call('XADD', KEYS[2], '*', 'job', ARGV[2])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[3])
return 1
