#!/usr/bin/sysbench
-- oltp_point_select, or with --sleep-ms=N a transaction that takes N ms on the server
-- (SELECT SLEEP): a client thread then serves at most 1000 / N transactions a second, whatever
-- the machine's speed. Used by the integration test of fixed-rate load (tests/integration/
-- test_fixed_rate.py): a rate far above that is an overload on purpose, whose backlog grows.

dofile("/usr/share/sysbench/oltp_point_select.lua")

sysbench.cmdline.options.sleep_ms = {"milliseconds each transaction sleeps on the server (0: a point select)", 0}

local point_select = event

function event()
   if sysbench.opt.sleep_ms > 0 then
      con:query(string.format("SELECT SLEEP(%g)", sysbench.opt.sleep_ms / 1000))
   else
      point_select()
   end
end
