-- wrk script of bench/service_load.py: POST /tier, each request with a query and passages of
-- its own (so no request is a cache hit and each is one judge call), with a client key.
--
--   wrk -t2 -c128 -d20s -s bench/service_load.lua http://127.0.0.1:PORT -- KEY PASSAGES [SALT]
--
-- done() prints one line of JSON: requests, seconds, errors by kind, latency percentiles in
-- microseconds (every 0.1 %, so several wrk processes' distributions can be pooled).

local words = {
  "vitamin", "calcium", "bone", "skin", "sunlight", "dose", "daily", "adults", "children",
  "deficiency", "rickets", "supplement", "microgram", "serum", "level", "winter", "latitude",
  "diet", "fish", "milk", "fortified", "absorption", "kidney", "liver", "hormone", "immune",
  "muscle", "fracture", "elderly", "pregnancy", "guideline", "agency", "study", "trial",
  "cohort", "risk", "benefit", "intake", "upper", "limit", "toxicity", "test", "blood",
  "season", "exposure",
}

local threads = {}  -- setup() runs in the main state; `id` is set in each thread's own
local counter = 0
local key = ""
local passages = 10
local salt = ""  -- told apart from the other wrk processes of a run (one per replica)

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  key = args[1]
  passages = tonumber(args[2] or "10")
  salt = args[3] or ""
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. key
end

local function passage(n, i)
  local length = 40 + (n * 7 + i * 5) % 31
  local out = {}
  for j = 1, length do
    out[j] = words[((n * 13 + i * 17 + j * (i % 11 + 3)) % #words) + 1]
  end
  return string.format(
    '{"passage_id":"p%d","text":"Record %s%d-%d-%d. %s."}', i, salt, id, n, i,
    table.concat(out, " ")
  )
end

function request()
  counter = counter + 1
  local parts = {}
  for i = 1, passages do
    parts[i] = passage(counter, i)
  end
  local body = string.format(
    '{"query":"how much vitamin D do adults need each day? (request %s%d-%d)","passages":[%s]}',
    salt, id, counter, table.concat(parts, ",")
  )
  return wrk.format("POST", "/tier", nil, body)
end

function done(summary, latency, requests)
  local points = {}
  for p = 1, 1000 do
    points[p] = latency:percentile(p / 10)
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"seconds":%.6f,"connect":%d,"read":%d,"write":%d,"status":%d,' ..
    '"timeout":%d,"percentiles_us":[%s]}\n',
    summary.requests, summary.duration / 1e6, e.connect, e.read, e.write, e.status,
    e.timeout, table.concat(points, ",")
  ))
end
