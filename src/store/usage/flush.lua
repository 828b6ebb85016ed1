-- Applies one part of a usage flush exactly once.
-- KEYS[1]: the part's marker key. ARGV[1]: marker TTL in seconds. ARGV[2]: JSON array of
-- operations, each an array of strings: a Redis command with its arguments, or
-- {"HSETNEWER", key, field, value, ...} whose values start with "<epoch ms>|": a field is
-- written only when it is absent or holds an older record (replicas may flush out of order).
-- A command Redis refuses (e.g. a counter that would overflow) is skipped, not fatal: the rest
-- of the part is still applied, since a half-applied part could never be settled correctly.
-- Returns {1, refused commands, first refusal} when applied, {0, 0, ""} when the marker shows
-- the part was applied (or voided) before.
local ops = cjson.decode(ARGV[2])
if not redis.call('SET', KEYS[1], 'applied', 'NX', 'EX', ARGV[1]) then
  return {0, 0, ''}
end
local refused, first = 0, ''
local function run(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    refused = refused + 1
    if first == '' then first = reply.err end
    return nil
  end
  return reply
end
local function stamp(value)
  return tonumber(string.match(value, '^(%-?%d+)|')) or -1
end
for _, op in ipairs(ops) do
  if op[1] == 'HSETNEWER' then
    local key = op[2]
    local fields = {}
    for i = 3, #op, 2 do
      fields[#fields + 1] = op[i]
    end
    local old = run('HMGET', key, unpack(fields))
    if old then
      local newer = {}
      for i = 3, #op, 2 do
        local stored = old[(i - 1) / 2]
        if not stored or stamp(stored) <= stamp(op[i + 1]) then
          newer[#newer + 1] = op[i]
          newer[#newer + 1] = op[i + 1]
        end
      end
      if #newer > 0 then
        run('HSET', key, unpack(newer))
      end
    end
  else
    run(unpack(op))
  end
end
return {1, refused, first}
