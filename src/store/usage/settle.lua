-- Settles a usage flush part whose write went unconfirmed. KEYS[1]: its marker key.
-- ARGV[1]: marker TTL in seconds. Returns "applied" when the part was applied; otherwise
-- voids the marker (so a copy of the part still on its way is skipped) and returns "voided".
local state = redis.call('GET', KEYS[1])
if state then
  return state
end
redis.call('SET', KEYS[1], 'voided', 'EX', ARGV[1])
return 'voided'
