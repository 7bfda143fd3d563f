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
 * With CPUs named, one thread per CPU, pinned to it, their periods staggered: the vCPUs of
 * this VM change speed apart (10 s medians of two pinned canaries correlate at r = 0.07-0.62,
 * bench/vcpu_speeds.py), and a workload on both follows both; one unpinned thread sees
 * whichever it happens to run on.
 *
 *   perflab-canary PERIOD_MS            ->  lines "monotonic_s work_ns", until killed
 *   perflab-canary PERIOD_MS CPU...     ->  lines "monotonic_s work_ns cpu", one thread a CPU
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORK 2000000UL
#define MAX_CPUS 1024

static long period_ms;
static int ncpus;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

struct spinner {
    int cpu; /* -1: not pinned */
    int index;
};

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nap(long ns)
{
    struct timespec pause = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&pause, NULL);
}

static void *spin(void *arg)
{
    struct spinner *me = arg;
    if (me->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(me->cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
            fprintf(stderr, "perflab-canary: cannot pin a thread to CPU %d\n", me->cpu);
            exit(3);
        }
        nap(period_ms * 1000000L * me->index / ncpus); /* staggered: one CPU at a time */
    }
    for (;;) {
        double c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
        for (unsigned long i = 0; i < WORK; i++)
            __asm__ volatile("" ::: "memory");
        double c1 = seconds(CLOCK_THREAD_CPUTIME_ID);
        pthread_mutex_lock(&out);
        int written = me->cpu >= 0 ? printf("%.6f %.0f %d\n", seconds(CLOCK_MONOTONIC), (c1 - c0) * 1e9, me->cpu)
                                   : printf("%.6f %.0f\n", seconds(CLOCK_MONOTONIC), (c1 - c0) * 1e9);
        pthread_mutex_unlock(&out);
        if (written < 0)
            exit(1); /* the reader is gone */
        nap(period_ms * 1000000L);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    period_ms = argc >= 2 ? atol(argv[1]) : 0;
    if (period_ms <= 0 || period_ms > 60000 || argc - 2 > MAX_CPUS) {
        fprintf(stderr, "usage: perflab-canary PERIOD_MS (1-60000) [CPU ...]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ncpus = argc - 2;
    if (ncpus == 0) {
        struct spinner one = {-1, 0};
        spin(&one);
    }
    static struct spinner spinners[MAX_CPUS];
    pthread_t threads[MAX_CPUS];
    for (int i = 0; i < ncpus; i++) {
        char *end;
        long cpu = strtol(argv[i + 2], &end, 10);
        if (*end || cpu < 0 || cpu >= CPU_SETSIZE) {
            fprintf(stderr, "perflab-canary: not a CPU number: %s\n", argv[i + 2]);
            return 2;
        }
        spinners[i] = (struct spinner){(int)cpu, i};
        if (pthread_create(&threads[i], NULL, spin, &spinners[i]) != 0) {
            fprintf(stderr, "perflab-canary: cannot start a thread\n");
            return 3;
        }
    }
    for (int i = 0; i < ncpus; i++)
        pthread_join(threads[i], NULL);
    return 0;
}
