// Known allocations for the allocation counter's test: each op at a size class nothing else
// in the process is likely to use in these numbers, across two threads.
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

static void work() {
    std::vector<void *> keep;
    for (int i = 0; i < 37; i++) keep.push_back(std::malloc(600000));       // class 20
    for (int i = 0; i < 11; i++) keep.push_back(std::calloc(3, 100000));     // 300000: class 19
    void *r = std::malloc(70);
    for (int i = 0; i < 5; i++) r = std::realloc(r, 40000000 + i);           // class 26
    keep.push_back(r);
    void *a = nullptr;
    for (int i = 0; i < 7; i++) {
        if (posix_memalign(&a, 4096, 9000000) == 0) keep.push_back(a);       // class 24
    }
    for (int i = 0; i < 13; i++) {
        char *p = new char[2500000];                                          // class 22
        std::memset(p, 1, 16);
        delete[] p;
    }
    for (void *p : keep) std::free(p);
}

int main() {
    std::thread t(work);
    work();
    t.join();
    return 0;
}
