/* perflab's host-speed canary ([observe] host_speed, run/observers/host_speed.py).
 *
 * Every PERIOD_MS it spins a fixed piece of register-only work (about 1 ms on a 2023 Xeon)
 * and prints when it ended and the CPU time the work took, in the thread's own CPU clock.
 * Preemption stops that clock, so a busy guest does not change it: the CPU time per unit of
 * work rises only when the vCPU itself runs slower (a busy sibling hyperthread or core on
 * the host, a lower clock), which no counter inside a VM shows. On the 2-vCPU VM perflab is
 * developed on it varies 2-4x over minutes on an idle guest, and QPS follows it
 * (docs/methodology.md#host-speed).
 *
 *   perflab-canary PERIOD_MS   ->  lines "monotonic_s work_ns", until killed
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORK 2000000UL

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long period_ms = argc == 2 ? atol(argv[1]) : 0;
    if (period_ms <= 0 || period_ms > 60000) {
        fprintf(stderr, "usage: perflab-canary PERIOD_MS (1-60000)\n");
        return 2;
    }
    struct timespec pause = {period_ms / 1000, (period_ms % 1000) * 1000000L};
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (;;) {
        double c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
        for (unsigned long i = 0; i < WORK; i++)
            __asm__ volatile("" ::: "memory");
        double c1 = seconds(CLOCK_THREAD_CPUTIME_ID);
        if (printf("%.6f %.0f\n", seconds(CLOCK_MONOTONIC), (c1 - c0) * 1e9) < 0)
            return 1; /* the reader is gone */
        nanosleep(&pause, NULL);
    }
}
