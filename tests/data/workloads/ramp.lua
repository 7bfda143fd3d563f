#!/usr/bin/sysbench
-- oltp_read_only with a synthetic warm-up: for its first --ramp-seconds, every transaction
-- is followed by a pause of (1 - elapsed/ramp) x its own duration, so throughput starts at
-- about half the steady rate and climbs linearly to it. Used by the integration test of
-- warm-up detection (a warm-up that runs into the measured window must be caught).

dofile("/usr/share/sysbench/oltp_read_only.lua")

sysbench.cmdline.options.ramp_seconds = {"seconds over which throughput climbs to its steady rate", 0}

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } perflab_timespec;
int clock_gettime(int clock, perflab_timespec *ts);
int usleep(unsigned int usec);
]]

local function now()
   local ts = ffi.new("perflab_timespec")
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local oltp_thread_init, oltp_event = thread_init, event
local started

function thread_init()
   oltp_thread_init()
   started = now()
end

function event()
   local begin = now()
   oltp_event()
   local ramp = sysbench.opt.ramp_seconds
   local elapsed = begin - started
   if ramp > 0 and elapsed < ramp then
      ffi.C.usleep(math.floor((now() - begin) * (1 - elapsed / ramp) * 1e6))
   end
end
