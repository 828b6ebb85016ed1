-- loadtest/fleet.lua — wrk script of loadtest/fleet.sh: a fleet of SDK instances, compressed
-- in time. Each instance polls GET /api/client/features every poll interval (15 s) and posts
-- POST /api/client/metrics every metrics interval (60 s): P = 4 polls per post. Real time is
-- replaced by "ticks": in tick t every instance of the thread polls once, in a fixed order, and
-- an instance whose phase matches (t + phase % P == 0) posts right after its poll, so the mix
-- (P polls per post) and each instance's own order are those of the real fleet, sent as fast
-- as wrk can.
--
-- wrk args (after --): instances apps poolfile tpr nthreads prefix seed etag start gzip P sample
--   etag   the ETag every instance holds at the start ("-" = none), for start=warm
--   start  warm: instances already hold `etag` (steady state, polls answer 304);
--          cold: no instance holds a configuration yet (first poll of each answers 200)
--   gzip   1: polls send Accept-Encoding: gzip, deflate (what the Python and Node SDKs send)
--   sample file to write a few requests of thread 1 to ("-" = none)
-- Per instance the poll sends If-None-Match with the ETag it last got. wrk does not say which
-- request a response belongs to, so the thread remembers the newest ETag it received in a 200
-- (the configuration does not change during a run) and an instance holds it from its first
-- poll on (cold: that first poll goes without If-None-Match).
-- Instance k (of `instances`) belongs to app k % apps and to wrk thread k % nthreads + 1.
-- Bodies are SDK-shaped as in ../../shared/bench/metricsbench.sh: even instances look like the
-- Python SDK (nanosecond timestamps, "no" before "yes"), odd ones like the Node SDK; `tpr`
-- distinct toggles of the pool per report, ~20% with variants {blue, red, disabled}.
-- Instance headers and body heads are built in init() (before the timed run); per request the
-- script only concatenates prebuilt strings.

local threads = {}
local nth = 0
function setup(thread)
  nth = nth + 1
  thread:set("tid", nth)
  threads[#threads + 1] = thread
end

-- per-thread counters, read by done() through thread:get
sent_poll, sent_post = 0, 0
st = {}             -- status -> count
first_bad = 0
post_bytes, post_n = 0, 0

local host, etag, accept, P
local hdr, head, phase, is_py, held = {}, {}, {}, {}, {}   -- per local instance index
local nloc = 0
local frags_py, frags_node, nfrag = {}, {}, 0
local pos, tick, pending = 0, 0, false

local PY_TAIL = "}}"
local NODE_TAIL = '},"platformName":"node","platformVersion":"20.20.2","yggdrasilVersion":null,"specVersion":"5.2.0"}'

local function uuid()
  return string.format("%08x-%04x-4%03x-%04x-%04x%08x", math.random(0, 0x7fffffff), math.random(0, 0xffff),
    math.random(0, 0xfff), math.random(0x8000, 0xbfff), math.random(0, 0xffff), math.random(0, 0x7fffffff))
end
local function secs(t) return os.date("!%Y-%m-%dT%H:%M:%S", t) end
local function ts_py(t) return secs(t) .. string.format(".%09dZ", math.random(0, 999999999)) end
local function ts_node(t) return secs(t) .. string.format(".%03dZ", math.random(0, 999)) end

function init(args)
  local instances, apps, poolfile = tonumber(args[1]), tonumber(args[2]), args[3]
  local tpr, nthreads, prefix, seed = tonumber(args[4]), tonumber(args[5]), args[6], tonumber(args[7])
  local etag0, start, gzip, sample = args[8], args[9], args[10], args[12]
  P = tonumber(args[11])
  math.randomseed(seed * 1000003 + tid * 7919)
  host = wrk.headers["Host"]
  etag = (start == "warm" and etag0 ~= "-") and etag0 or nil
  accept = gzip == "1" and "Accept-Encoding: gzip, deflate\r\n" or ""

  local names = {}
  for line in io.lines(poolfile) do if #line > 0 then names[#names + 1] = line end end
  local np = #names
  if tpr > np then tpr = np end

  -- the toggles part of the bucket, both shapes; reports cycle through these
  local now = os.time()
  nfrag = 500
  for f = 1, nfrag do
    for _, py in ipairs({ true, false }) do
      local used, parts = {}, {}
      while #parts < tpr do
        local i = math.random(np)
        if not used[i] then
          used[i] = true
          local yes, no = math.random(0, 500), math.random(0, 500)
          local variants = "{}"
          if math.random() < 0.2 then
            local blue = math.random(0, yes)
            variants = string.format('{"blue":%d,"red":%d,"disabled":%d}', blue, yes - blue, no)
          end
          if py then
            parts[#parts + 1] = string.format('"%s":{"no":%d,"yes":%d,"variants":%s}', names[i], no, yes, variants)
          else
            parts[#parts + 1] = string.format('"%s":{"yes":%d,"no":%d,"variants":%s}', names[i], yes, no, variants)
          end
        end
      end
      local stop = now - math.random(0, 30)
      local ts = py and ts_py or ts_node
      local frag = string.format('"bucket":{"start":"%s","stop":"%s","toggles":{%s}', ts(stop - 60), ts(stop), table.concat(parts, ","))
      if py then frags_py[f] = frag else frags_node[f] = frag end
    end
  end

  -- this thread's instances: k = tid-1, tid-1+nthreads, ...
  for k = tid - 1, instances - 1, nthreads do
    nloc = nloc + 1
    local app = string.format("%s-app-%03d", prefix, k % apps)
    local iid = string.format("%s-inst-%06d", prefix, k)
    local py = (k % 2 == 0)
    local conn = uuid()
    is_py[nloc] = py
    held[nloc] = (etag ~= nil)   -- warm: holds the current configuration already
    hdr[nloc] = string.format("Host: %s\r\nUNLEASH-APPNAME: %s\r\nUNLEASH-INSTANCEID: %s\r\nunleash-connection-id: %s\r\nunleash-sdk: %s\r\nUnleash-Client-Spec: %s\r\n",
      host, app, iid, conn, py and "unleash-python-sdk:6.9.1" or "unleash-node-sdk:6.12.1", py and "6.1.0" or "5.2.0")
    if py then
      head[nloc] = string.format('{"appName":"%s","instanceId":"%s","connectionId":"%s","platformName":"CPython","platformVersion":"3.11.7","yggdrasilVersion":"0.20.8","specVersion":"6.1.0",', app, iid, conn)
    else
      head[nloc] = string.format('{"appName":"%s","instanceId":"%s","connectionId":"%s",', app, iid, conn)
    end
    phase[nloc] = math.floor(((k * 2654435761) % 4294967296) * P / 4294967296)   -- top bits of a multiplicative hash
  end
  pos = math.random(nloc) - 1   -- threads start at different places of their tick

  if sample ~= "-" and tid == 1 then
    local f = io.open(sample, "w")
    for i = 1, 2 * P + 2 do f:write(request(), "\n\n") end
    f:close()
    sent_poll, sent_post, post_bytes, post_n, tick, pending = 0, 0, 0, 0, 0, false
    for j = 1, nloc do held[j] = (etag ~= nil) end
    pos = math.random(nloc) - 1
  end
end

local function poll(i)
  sent_poll = sent_poll + 1
  local inm = (held[i] and etag) and ("If-None-Match: " .. etag .. "\r\n") or ""
  held[i] = true   -- from now on the instance holds what this poll returns
  return "GET /api/client/features HTTP/1.1\r\n" .. hdr[i] .. "unleash-interval: 15000\r\n" .. accept .. inm .. "\r\n"
end

local function post(i)
  sent_post = sent_post + 1
  local f = (i * 7 + tick) % nfrag + 1
  local body
  if is_py[i] then
    body = head[i] .. frags_py[f] .. PY_TAIL
  else
    body = head[i] .. frags_node[f] .. NODE_TAIL
  end
  post_bytes = post_bytes + #body
  post_n = post_n + 1
  return "POST /api/client/metrics HTTP/1.1\r\n" .. hdr[i] .. "unleash-interval: 60000\r\nContent-Type: application/json\r\nContent-Length: "
    .. #body .. "\r\n\r\n" .. body
end

function request()
  local i = pos + 1
  if pending then
    pending = false
    pos = pos + 1
    if pos >= nloc then pos = 0; tick = tick + 1 end
    return post(i)
  end
  if (tick + phase[i]) % P == 0 then
    pending = true
  else
    pos = pos + 1
    if pos >= nloc then pos = 0; tick = tick + 1 end
  end
  return poll(i)
end

function response(status, headers, body)
  st[status] = (st[status] or 0) + 1
  if status == 200 then
    local e = headers["etag"] or headers["ETag"] or headers["Etag"]
    if e then etag = e end
  elseif status ~= 304 and (status < 200 or status > 299) and first_bad == 0 then
    first_bad = status
  end
end

function done(summary, latency, requests)
  local sp, ss, fb, pb, pn = 0, 0, 0, 0, 0
  local sts = {}
  for _, t in ipairs(threads) do
    sp = sp + (t:get("sent_poll") or 0)
    ss = ss + (t:get("sent_post") or 0)
    pb = pb + (t:get("post_bytes") or 0)
    pn = pn + (t:get("post_n") or 0)
    if fb == 0 then fb = t:get("first_bad") or 0 end
    for code, n in pairs(t:get("st") or {}) do sts[code] = (sts[code] or 0) + n end
  end
  local codes = {}
  for code, n in pairs(sts) do codes[#codes + 1] = string.format("%d:%d", code, n) end
  table.sort(codes)
  io.write(string.format("RESULT requests=%d duration_us=%d bytes=%d connect_err=%d read_err=%d write_err=%d timeout_err=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d mean_us=%.1f sent_poll=%d sent_post=%d first_bad=%d post_body_avg=%d statuses=%s\n",
    summary.requests, summary.duration, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    sp, ss, fb, pn > 0 and math.floor(pb / pn) or 0, #codes > 0 and table.concat(codes, ",") or "-"))
end
