// Gaps in a spinning loop of TSC reads, with or without a PAUSE per iteration: the stops a
// spinning poll loop's CPU takes that the guest kernel does not see (docs/design.md, "Switch
// runtime", why a spinning worker has no PAUSE in its idle loop).
//
//   gcc -O2 -o /tmp/spin-gaps scripts/bench/spin-gaps.c
//   /tmp/spin-gaps PAUSE SECS CPU     PAUSE 1: _mm_pause() per iteration, 0: none
//
// Prints the iterations, the mean iteration, the largest gap, the involuntary context switches,
// and per bound the gaps above it with their share of the time. Gaps between two bounds are the
// difference of their counts.
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: spin-gaps PAUSE(0|1) SECS CPU\n");
    return 2;
  }
  int pause = atoi(argv[1]);
  double secs = atof(argv[2]);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(atoi(argv[3]), &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("sched_setaffinity");
    return 1;
  }
  // TSC ticks per nanosecond, over 50 ms.
  uint64_t t0 = mono_ns(), c0 = __rdtsc();
  while (mono_ns() - t0 < 50000000) {
  }
  double tpn = (double)(__rdtsc() - c0) / (double)(mono_ns() - t0);
  uint64_t end = __rdtsc() + (uint64_t)(secs * 1e9 * tpn);
  const double bound[] = {500, 1000, 2000, 5000, 10000, 50000};
  double in_gaps[6] = {0};
  long count[6] = {0};
  uint64_t last = __rdtsc(), n = 0, max = 0;
  double total = 0;
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  for (;;) {
    uint64_t t = __rdtsc(), g = t - last;
    last = t;
    n++;
    double gns = (double)g / tpn;
    total += gns;
    if (g > max) max = g;
    for (int i = 0; i < 6; i++) {
      if (gns > bound[i]) {
        in_gaps[i] += gns;
        count[i]++;
      }
    }
    if (t > end) break;
    if (pause) _mm_pause();
  }
  getrusage(RUSAGE_SELF, &r1);
  printf("pause=%d iters=%lu ns/iter=%.1f max=%.1fus nivcsw=%ld |", pause, (unsigned long)n,
         total / (double)n, (double)max / tpn / 1e3, r1.ru_nivcsw - r0.ru_nivcsw);
  for (int i = 0; i < 6; i++)
    printf(" >%.1fus: %ld (%.3f%% time)", bound[i] / 1e3, count[i], 100 * in_gaps[i] / total);
  printf("\n");
  return 0;
}
