-- Applies one part of a usage flush exactly once.
-- KEYS[1]: the part's marker key. ARGV[1]: marker TTL in seconds. ARGV[2]: JSON array of
-- operations, each an array of strings: a Redis command with its arguments, or
-- {"HSETNEWER", key, field, value, ...} whose values start with "<epoch ms>|": a field is
-- written only when it is absent or holds an older record (replicas may flush out of order).
-- Returns 1 when applied, 0 when the marker shows the part was applied (or voided) before.
if not redis.call('SET', KEYS[1], 'applied', 'NX', 'EX', ARGV[1]) then
  return 0
end
local function stamp(value)
  return tonumber(string.match(value, '^(%-?%d+)|')) or -1
end
for _, op in ipairs(cjson.decode(ARGV[2])) do
  if op[1] == 'HSETNEWER' then
    local key = op[2]
    local fields = {}
    for i = 3, #op, 2 do
      fields[#fields + 1] = op[i]
    end
    local old = redis.call('HMGET', key, unpack(fields))
    local newer = {}
    for i = 3, #op, 2 do
      local stored = old[(i - 1) / 2]
      if not stored or stamp(stored) <= stamp(op[i + 1]) then
        newer[#newer + 1] = op[i]
        newer[#newer + 1] = op[i + 1]
      end
    end
    if #newer > 0 then
      redis.call('HSET', key, unpack(newer))
    end
  else
    redis.call(unpack(op))
  end
end
return 1
