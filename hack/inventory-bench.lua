-- wrk script for hack/inventory-bench.sh: one request per call, cycling over the host UUIDs in
-- $INV_UUIDS, with the bearer token $INV_TOKEN. $INV_OP is "get" (GET a host's labels) or
-- "post" (overwrite one label on a host).
local uuids = {}
for line in io.lines(os.getenv("INV_UUIDS")) do
   uuids[#uuids + 1] = line
end
local op = os.getenv("INV_OP")
local headers = {
   ["Authorization"] = "Bearer " .. os.getenv("INV_TOKEN"),
   ["Content-Type"] = "application/json",
}
local i = 0

request = function()
   i = i + 1
   local uuid = uuids[(i % #uuids) + 1]
   if op == "post" then
      return wrk.format("POST", "/v1/labels/" .. uuid .. "?overwrite=true", headers,
                        '{"load":"v' .. i .. '"}')
   end
   return wrk.format("GET", "/v1/ihosts/" .. uuid .. "/labels", headers)
end

done = function(summary, latency, requests)
   io.write(string.format("non-2xx answers: %d (socket errors: connect %d, read %d, write %d, timeout %d)\n",
      summary.errors.status, summary.errors.connect, summary.errors.read,
      summary.errors.write, summary.errors.timeout))
   io.write(string.format("RESULT %d requests, %.0f req/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, non-2xx %d\n",
      summary.requests, summary.requests / (summary.duration / 1e6),
      latency:percentile(50) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
      summary.errors.status))
end
