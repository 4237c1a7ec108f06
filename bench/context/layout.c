/* A program whose speed may depend on where its stack lands, for bench/context_effect.py.
 *
 * The kernel copies the environment's strings (and the program's path) to the top of the
 * stack, so every byte of environment moves main's stack frame down, in 16-byte steps
 * (Mytkowicz et al., "Producing wrong data without doing anything obviously wrong!",
 * ASPLOS 2009). Two kernels, two ways that can change speed:
 *
 *   sum    the sum of 4096 ints in an array on main's stack, vectorized by the compiler;
 *          with 64-byte vectors (gcc -O3 -march=native on an AVX-512 machine) every load
 *          crosses a cache line unless the array is 64-byte aligned: one padding in four.
 *   alias  a counter on main's stack (volatile, so it lives in memory, as at -O0) added
 *          into a global: where the two addresses agree in their low 12 bits, the
 *          counter's loads may wait for the global's stores (4K aliasing): one stack
 *          offset in 256.
 *
 * Usage: layout sum|alias [ROUNDS]. Each round times one batch of calls; the fastest round
 * is printed, as "ns N" (nanoseconds per call), with where the stack data landed
 * ("array_mod_64 A counter_mod_4096 C global_mod_4096 G").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LENGTH 4096
#define SUM_CALLS 50
#define ALIAS_STEPS 200000

static _Alignas(16) volatile long total;

/* noipa: no inlining, cloning or knowledge of the caller, so the compiler neither
 * over-aligns the caller's array nor computes the sum once for every call. */
__attribute__((noipa)) static int sum(const int *x, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}

__attribute__((noipa)) static void fill(int *x, int n) {
    for (int i = 0; i < n; i++) x[i] = (int)(i * 2654435761u);
}

__attribute__((noipa)) static void alias(volatile long *counter) {
    for (*counter = 0; *counter < ALIAS_STEPS; ++*counter) total += *counter;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "sum") && strcmp(argv[1], "alias"))) {
        fprintf(stderr, "usage: %s sum|alias [ROUNDS]\n", argv[0]);
        return 2;
    }
    int is_sum = !strcmp(argv[1], "sum");
    int rounds = argc > 2 ? atoi(argv[2]) : 30;
    int array[LENGTH];
    _Alignas(16) volatile long counter;
    int checksum = 0;
    double best = 1e300;
    fill(array, LENGTH);
    for (int r = 0; r < rounds; r++) {
        double start = now_ns();
        if (is_sum)
            for (int k = 0; k < SUM_CALLS; k++) checksum += sum(array, LENGTH);
        else
            alias(&counter);
        double took = (now_ns() - start) / (is_sum ? SUM_CALLS : 1);
        if (took < best) best = took;
    }
    printf("ns %.1f array_mod_64 %lu counter_mod_4096 %lu global_mod_4096 %lu checksum %d\n",
           best, (unsigned long)((uintptr_t)array % 64),
           (unsigned long)((uintptr_t)&counter % 4096),
           (unsigned long)((uintptr_t)&total % 4096), checksum);
    return 0;
}
