/*
 * bench/handoff_ring.c's ring, each hand-off's wake and the waker's park in one
 * io_uring_enter (a FUTEX_WAKE of the next, then a FUTEX_WAIT of its own turn), beside
 * the plain futex wake then futex wait; a measure for sync31-s58's "what is left".
 *
 *     cc -O2 -pthread -o /tmp/handoff_uring bench/handoff_uring.c
 *     perf stat -e cs,sched:sched_migrate_task /tmp/handoff_uring [--uring] [--pin CPU]
 *         [--hops 40000] [--work-us 3]
 *
 * With the plain pair the wakee preempts its waker, still runnable with its park to do
 * (EEVDF wakeup preemption; on this VM 1.5-1.8 switches a hop); in one io_uring_enter the
 * waker is asleep in the call before the wakee runs (a preemption-none kernel defers the
 * resched to the return to user space): one switch a hop. Needs io_uring's futex ops
 * (kernel 6.7 or later; their opcodes are spelled out for older headers). 8 threads;
 * each thread's first wait and last wake are plain futex calls. Prints one JSON line.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OP_FUTEX_WAIT 51
#define OP_FUTEX_WAKE 52
#define FUTEX2_SIZE_U32 0x02
#define FUTEX2_PRIVATE 128

static int threads = 8, uring = 0, pin = -1;
static long hops = 40000;
static double work_us = 3.0;
static _Atomic unsigned turn[64];

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void work(void) { double u = now() + work_us * 1e-6; while (now() < u) {} }

struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static void ring_init(struct ring *r) {
    struct io_uring_params p; memset(&p, 0, sizeof p);
    r->fd = syscall(__NR_io_uring_setup, 4, &p);
    if (r->fd < 0) { perror("io_uring_setup"); exit(1); }
    size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    char *cq = (p.features & IORING_FEAT_SINGLE_MMAP) ? sq : mmap(0, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    if (p.features & IORING_FEAT_SINGLE_MMAP && cqsz > sqsz) { munmap(sq, sqsz); sq = cq = mmap(0, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING); }
    r->sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail); r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head); r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask); r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

static void push(struct ring *r, int op, _Atomic unsigned *word, unsigned long val, int flags) {
    unsigned tail = *r->sq_tail, i = tail & *r->sq_mask;
    struct io_uring_sqe *s = &r->sqes[i]; memset(s, 0, sizeof *s);
    s->opcode = op; s->fd = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE; s->addr = (unsigned long)word;
    s->addr2 = val; s->addr3 = 0xffffffffUL; s->flags = flags;
    r->sq_array[i] = i;
    atomic_store_explicit((_Atomic unsigned *)r->sq_tail, tail + 1, memory_order_release);
}

/* wake `next` (unless < 0) and wait for my turn, in one syscall each round */
static void wake_and_wait(struct ring *r, int next, int me) {
    int n = 0;
    if (next >= 0) { atomic_store(&turn[next], 1); push(r, OP_FUTEX_WAKE, &turn[next], 1, IOSQE_CQE_SKIP_SUCCESS); n++; }
    for (;;) {
        if (atomic_load(&turn[me])) { break; }
        push(r, OP_FUTEX_WAIT, &turn[me], 0, 0); n++;
        if (syscall(__NR_io_uring_enter, r->fd, n, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) { perror("enter"); exit(1); }
        n = 0;
        unsigned head = *r->cq_head;
        while (head != atomic_load_explicit((_Atomic unsigned *)r->cq_tail, memory_order_acquire)) head++;
        atomic_store_explicit((_Atomic unsigned *)r->cq_head, head, memory_order_release);
    }
    if (n) syscall(__NR_io_uring_enter, r->fd, n, 0, 0, NULL, 0);
    atomic_store(&turn[me], 0);
}

static void plain_wake(int i) { atomic_store(&turn[i], 1); syscall(SYS_futex, &turn[i], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
static void plain_wait(int i) { while (!atomic_load(&turn[i])) syscall(SYS_futex, &turn[i], FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0); atomic_store(&turn[i], 0); }

static void *run(void *arg) {
    long i = (long)arg; long rounds = hops / threads;
    if (pin >= 0) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(pin, &s); sched_setaffinity(0, sizeof s, &s); }
    struct ring r; if (uring) ring_init(&r);
    plain_wait((int)i);
    for (long k = 0; k < rounds; k++) {
        work();
        int last = (i == threads - 1 && k == rounds - 1);
        int next = last ? -1 : (int)((i + 1) % threads);
        if (k == rounds - 1) { if (!last) plain_wake(next); break; }
        if (uring) wake_and_wait(&r, next, (int)i);
        else { plain_wake(next); plain_wait((int)i); }
    }
    return NULL;
}

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--uring")) uring = 1;
        else if (!strcmp(argv[a], "--pin")) pin = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--hops")) hops = atol(argv[++a]);
        else if (!strcmp(argv[a], "--work-us")) work_us = atof(argv[++a]);
    }
    pthread_t ids[64];
    for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, run, (void *)i);
    usleep(20000);
    double t0 = now(); plain_wake(0);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    double hop = (now() - t0) / (double)(hops / threads * threads) * 1e6;
    printf("{\"handoff\": \"%s\", \"pin\": %d, \"us_a_hop\": %.2f, \"us_a_hop_beyond_work\": %.2f}\n", uring ? "io_uring wake+wait" : "futex", pin, hop, hop - work_us);
    return 0;
}
