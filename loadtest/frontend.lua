-- wrk script of loadtest/frontend.sh; the mode comes from the environment (FRONTEND_MODE):
--   random        GET /api/frontend with a random userId per request (nothing cacheable)
--   repoll        GET /api/frontend for one of 1,000 fixed contexts, with its If-None-Match
--   bulk          POST /ofrep/v1/evaluate/flags with a random targetingKey per request
--   bulk-repoll   POST /ofrep/v1/evaluate/flags for one of 1,000 fixed contexts, If-None-Match
--   client304     GET /api/client/features with its ETag, through the same table lookup and
--                 formatting as repoll, so that both 304 rates pay the same client-side cost
-- The re-poll modes read the ETags from the Lua file FRONTEND_ETAGS (frontend.py etags).
-- FRONTEND_TOKEN, when set, is sent as the Authorization header (for a peer server).
local mode = os.getenv("FRONTEND_MODE") or "random"
local token = os.getenv("FRONTEND_TOKEN")
local etag_file = os.getenv("FRONTEND_ETAGS")
if etag_file and etag_file ~= "" then
  dofile(etag_file)
end

function init(args)
  math.randomseed(os.time() + (tonumber(tostring({}):sub(8)) or 0))
end

-- The request's headers: `extra` and the token's Authorization when there is one.
local function with_token(extra)
  if token and token ~= "" then extra["Authorization"] = token end
  return extra
end

function request()
  if mode == "random" then
    return wrk.format("GET", "/api/frontend?appName=web&userId=u" .. math.random(1, 1000000000)
      .. "&properties%5Bplan%5D=pro", with_token({}))
  elseif mode == "repoll" then
    local i = math.random(0, #frontend_etags - 1)
    return wrk.format("GET", "/api/frontend?appName=web&userId=ctx-" .. i .. "&properties%5Bplan%5D=pro",
      with_token({ ["If-None-Match"] = frontend_etags[i + 1] }))
  elseif mode == "client304" then
    -- The same random pick and concatenation as repoll, for the same client-side cost; the
    -- path stays bare (a query would take the client API's filter path).
    local i = math.random(0, #frontend_etags - 1)
    local unused = "/api/frontend?appName=web&userId=ctx-" .. i .. "&properties%5Bplan%5D=pro"
    return wrk.format("GET", "/api/client/features", with_token({ ["If-None-Match"] = client_etag }))
  elseif mode == "bulk" then
    return wrk.format("POST", "/ofrep/v1/evaluate/flags", { ["Content-Type"] = "application/json" },
      '{"context":{"targetingKey":"u' .. math.random(1, 1000000000) .. '","appName":"web"}}')
  else
    local i = math.random(0, #bulk_etags - 1)
    return wrk.format("POST", "/ofrep/v1/evaluate/flags",
      { ["Content-Type"] = "application/json", ["If-None-Match"] = bulk_etags[i + 1] },
      '{"context":{"targetingKey":"ctx-' .. i .. '","appName":"web"}}')
  end
end
