/* Known allocator-like system calls: one round for each byte that arrives on stdin, then a byte
 * on stdout that says the round is done. */
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
    char go;
    while (read(0, &go, 1) == 1) {
        for (int i = 0; i < 17; i++) {
            void *p = mmap(0, 3 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) return 2;
            if (i < 5) mprotect(p, 8192, PROT_READ);
            if (i < 4) madvise(p, 65536, MADV_DONTNEED);
            munmap(p, 3 << 20);
        }
        if (write(1, "d", 1) != 1) return 3;
    }
    return 0;
}
