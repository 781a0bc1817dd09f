-- wrk script of the benchmark's saturated phases (bench/wrk.ts): POST to PATH (/api/report, or
-- /api/reports with a batch a line) with the realistic sample bodies, one per line of a file
-- written at the start of the phase, and the project keys (one per line) round-robin; every request is formatted once, in init(), so that
-- request() is a table lookup. done() prints one JSON line: requests, errors, latency
-- percentiles (µs), answers by status, and the CPU wrk itself used (from /proc/self/stat).
--   wrk -t1 -c64 -d15s -s bench/wrk-report.lua http://127.0.0.1:3000 -- BODIES KEYS TALLY [PATH]
-- BODIES "GET" sends GET PATH with each key in turn instead, and Accept-Encoding: the 5th argument.
-- BODIES ending in ".otlp-parts" (bench/otlp-bodies.ts) sends OTLP/HTTP protobuf exports to PATH:
-- templates cut at each span's trace id marker, joined in every request by 8 bytes of its own
-- (the file's salt and a counter), so that no span's ids are sent twice.
-- TALLY "1" counts answers by status in response(): wrk then parses every answer's headers and
-- body into Lua, which costs CPU (bench/README.md has the measurement); "0" leaves response()
-- out, and wrk counts answers >= 400 in summary.errors.status only.

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local requests = {}
local count = 0
local at = 0
-- The OTLP mode: per template, its request head (with Content-Length) and its body's parts.
local otlp = nil
local salt = ""
local sent = 0
statuses = {}

function init(args)
  local bodies_file, keys_file, tally = args[1], args[2], args[3]
  local path = args[4] or "/api/report"
  local keys = {}
  for line in io.lines(keys_file) do
    if #line > 0 then keys[#keys + 1] = line end
  end
  if bodies_file:sub(-11) == ".otlp-parts" then
    otlp = {}
    local f = assert(io.open(bodies_file, "rb"))
    salt = f:read(4)
    -- One wrk a edge reads the same file: the edge's port in the salt keeps their ids apart.
    local port = tonumber(wrk.port) or 0
    salt = salt:sub(1, 2) .. string.char(bit.band(bit.rshift(port, 8), 255), bit.band(port, 255))
    f:read("*l")
    while true do
      local n = f:read("*l")
      if not n or #n == 0 then break end
      local parts, size = {}, 0
      for i = 1, tonumber(n) do
        local len = tonumber(f:read("*l"))
        parts[i] = len > 0 and f:read(len) or ""
        size = size + len
      end
      size = size + 8 * (#parts - 1)
      local key = keys[(count % #keys) + 1]
      local full = wrk.format("POST", path, {
        ["Content-Type"] = "application/x-protobuf",
        ["Authorization"] = "Bearer " .. key,
      }, string.rep("x", size))
      count = count + 1
      otlp[count] = { head = full:sub(1, #full - size), parts = parts }
    end
    f:close()
  elseif bodies_file == "GET" then
    -- The read bench (bench/read-wrk.ts): GET PATH with each key in turn, and Accept-Encoding.
    for _, key in ipairs(keys) do
      count = count + 1
      requests[count] = wrk.format("GET", path, {
        ["Authorization"] = "Bearer " .. key,
        ["Accept-Encoding"] = args[5],
      })
    end
  else
    for body in io.lines(bodies_file) do
      if #body > 0 then
        local key = keys[(count % #keys) + 1]
        requests[count + 1] = wrk.format("POST", path, {
          ["Content-Type"] = "application/json",
          ["Authorization"] = "Bearer " .. key,
        }, body)
        count = count + 1
      end
    end
  end
  -- Threads start at different places in the list.
  at = (id * 997) % count
  if tally ~= "1" then response = nil end
end

local function be32(n)
  return string.char(bit.band(bit.rshift(n, 24), 255), bit.band(bit.rshift(n, 16), 255),
    bit.band(bit.rshift(n, 8), 255), bit.band(n, 255))
end

function request()
  at = at + 1
  if at > count then at = 1 end
  if otlp then
    -- The salt, then this thread's request number: new ids for every span of every request.
    sent = sent + 1
    local t = otlp[at]
    return t.head .. table.concat(t.parts, salt .. be32(id * 16777216 + sent))
  end
  return requests[at]
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

local function cpu_seconds()
  local f = io.open("/proc/self/stat", "r")
  if not f then return -1 end
  local stat = f:read("*a")
  f:close()
  -- Fields after the command name (in parentheses); utime and stime are the 12th and 13th.
  local rest = stat:match("%) (.*)")
  local fields = {}
  for v in rest:gmatch("%S+") do fields[#fields + 1] = v end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100
end

function done(summary, latency, requests)
  local tally = {}
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses") or {}) do
      tally[code] = (tally[code] or 0) + n
    end
  end
  local by_status = {}
  for code, n in pairs(tally) do
    by_status[#by_status + 1] = string.format('"%d":%d', code, n)
  end
  local e = summary.errors
  io.write(string.format(
    '{"wrk":1,"durationUs":%d,"requests":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},' ..
      '"statuses":{%s},"cpuSeconds":%.2f}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, table.concat(by_status, ","), cpu_seconds()))
end
