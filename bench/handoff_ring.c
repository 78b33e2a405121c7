/*
 * The bare cost of a thread-to-thread hand-off on this machine, beside the sync chain's hop.
 *
 *     cc -O2 -pthread -o /tmp/handoff_ring bench/handoff_ring.c
 *     /tmp/handoff_ring [--threads 8] [--hops 40000] [--work-us 3] [--pipe] [--batch]
 *
 * THREADS threads in a ring, as the 8 appenders of a sync round relay the GIL
 * (docs/PERFORMANCE.md, "sync31-s51", "sync31-s52"): each waits for its turn (a futex
 * wait, as `std::thread::park`), spins WORK_US microseconds (the GIL's work of one
 * append), wakes the next (a futex wake, as `Thread::unpark`) and waits again. No
 * Python, no store, no fdatasync: what is left is the wake-up, the wait for a CPU and
 * the switch. `--pipe` hands over through a pipe per thread instead (poll + read, write:
 * a pipe's wake-up is a "sync" one, which the scheduler may place on the waker's CPU);
 * `--batch` makes every thread SCHED_BATCH (a woken batch thread does not preempt its
 * waker). Run it in the same minutes as bench/sync_rounds.py: its `hop_*` medians are
 * this figure plus the engine's own work. Prints one JSON line.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

static int threads = 8, use_pipe = 0, batch = 0;
static long hops = 40000;
static double work_us = 3.0;
static atomic_int turn[MAX_THREADS];
static int pipes[MAX_THREADS][2];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void work(void) {
    double until = now() + work_us * 1e-6;
    while (now() < until) {
    }
}

static void wake(int i) {
    if (use_pipe) {
        char byte = 1;
        if (write(pipes[i][1], &byte, 1) != 1) abort();
        return;
    }
    atomic_store(&turn[i], 1);
    syscall(SYS_futex, &turn[i], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_turn(int i) {
    if (use_pipe) {
        struct pollfd ready = {pipes[i][0], POLLIN, 0};
        char byte;
        while (poll(&ready, 1, -1) != 1) {
        }
        if (read(pipes[i][0], &byte, 1) != 1) abort();
        return;
    }
    while (!atomic_load(&turn[i]))
        syscall(SYS_futex, &turn[i], FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    atomic_store(&turn[i], 0);
}

static void *ring(void *arg) {
    long i = (long)arg;
    if (batch) {
        struct sched_param param = {0};
        if (sched_setscheduler(0, SCHED_BATCH, &param) != 0) abort();
    }
    for (long k = 0; k < hops / threads; k++) {
        wait_turn((int)i);
        work();
        if (!(i == threads - 1 && k == hops / threads - 1)) wake((int)((i + 1) % threads));
    }
    return NULL;
}

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--hops") && a + 1 < argc) hops = atol(argv[++a]);
        else if (!strcmp(argv[a], "--work-us") && a + 1 < argc) work_us = atof(argv[++a]);
        else if (!strcmp(argv[a], "--pipe")) use_pipe = 1;
        else if (!strcmp(argv[a], "--batch")) batch = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--hops N] [--work-us US] [--pipe] [--batch]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 2 || threads > MAX_THREADS || hops < threads) return 2;
    for (int i = 0; i < threads; i++)
        if (pipe(pipes[i]) != 0) return 1;
    pthread_t ids[MAX_THREADS];
    for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, ring, (void *)i);
    usleep(10000); /* all of them waiting */
    double started = now();
    wake(0);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    double hop_us = (now() - started) / (double)(hops / threads * threads) * 1e6;
    printf("{\"threads\": %d, \"hops\": %ld, \"work_us\": %.1f, \"handoff\": \"%s%s\", "
           "\"us_a_hop\": %.2f, \"us_a_hop_beyond_work\": %.2f}\n",
           threads, hops / threads * threads, work_us, use_pipe ? "pipe" : "futex",
           batch ? "+batch" : "", hop_us, hop_us - work_us);
    return 0;
}
