/* Allocates when told: for each byte read from stdin it mallocs and frees COUNT buffers of 1000
 * bytes, then writes one byte back; it exits at the end of its input. Built -O0 (gcc may drop a
 * malloc whose result is only freed), dynamically and -static (where LD_PRELOAD does nothing). */
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 100;
    char c;
    while (read(0, &c, 1) == 1) {
        for (int i = 0; i < count; i++) {
            void *volatile p = malloc(1000);
            free(p);
        }
        if (write(1, &c, 1) != 1) return 1;
    }
    return 0;
}
