/* bench/archive/host_speed.py's canary: how fast this vCPU runs a fixed piece of register-only work.
 * Every PERIOD_MS it spins WORK iterations and prints the wall time and the thread CPU time they
 * took: preemption stops the thread's CPU clock, so CPU time per unit of work rises only when the
 * vCPU itself runs slower (a busy sibling hyperthread or core on the host, a lower clock), which
 * the guest's own accounting (steal, other processes) does not show.
 *   canary SECONDS PERIOD_MS   ->  lines "wall_epoch_s cpu_s_per_unit"
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORK 2000000UL /* about 1 ms on this VM */

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    double end = clock_s(CLOCK_MONOTONIC) + atof(argv[1]);
    struct timespec pause = {0, atol(argv[2]) * 1000000L};
    while (clock_s(CLOCK_MONOTONIC) < end) {
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        for (unsigned long i = 0; i < WORK; i++)
            __asm__ volatile("" ::: "memory");
        double c1 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        printf("%.3f %.6f\n", clock_s(CLOCK_REALTIME), c1 - c0);
        fflush(stdout);
        nanosleep(&pause, NULL);
    }
    return 0;
}
