/* The host sentinel: how fast this CPU runs a serial ping-pong right now, with nothing of ours but itself on it.
 * Two processes, this one and a child, pass one byte back and forth over a Unix socketpair; both inherit the CPU
 * affinity they are started with (the caller pins them to one CPU). Each line "N" on stdin runs N roundtrips and
 * prints their total in ns on stdout. A roundtrip is two context switches and four system calls, all kernel and
 * scheduler work, the kind of work that dominates a ping-pong on one CPU; no network, no allocation.
 * A line "N PGID [PGID...]" (at most MAX_GROUPS) is a slice inside a measured window (harness/measure/pacer.py): it
 * stops those process groups with SIGSTOP, runs the N roundtrips, continues the groups with SIGCONT, and prints
 * "SLICE_NS PAUSE_NS", the pause timed from before the first stop to after the last continue. Done here, on the
 * cell's CPU, the CPU never idles between the cell and the slice: on a VM an idle vCPU halts, and waking it again
 * cost about 0.3 ms a pause when the orchestrator stopped and continued the cell from the other CPU. Whatever ends a
 * slice, the groups it stopped are continued first.
 * With --preempt both processes run in the real-time class (SCHED_FIFO, priority 1): woken for a slice, the sentinel
 * takes the CPU from the cell at once, and while one of its two processes is runnable no ordinary process runs on
 * that CPU. A slice with groups then stops no one (the cell on this CPU simply does not run meanwhile: no SIGSTOP,
 * none of its threads woken to stop and woken again) and only sends SIGCONT after it, which a client counts as the
 * end of a pause. If the real-time class is refused, it says so on stderr and exits 3.
 * The child dies with the parent (PR_SET_PDEATHSIG) and at the end of stdin; exit codes: 0, 1 on a system error.
 * Used by harness/measure/pacer.py, benchmarks/host_modes.py and benchmarks/per_cpu_keeping.py.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GROUPS 16

static long long now_ns(void) {
    struct timespec moment;
    clock_gettime(CLOCK_MONOTONIC, &moment);
    return moment.tv_sec * 1000000000LL + moment.tv_nsec;
}

static int one_byte(int fd, char *byte, int sending) {
    for (;;) {
        ssize_t done = sending ? write(fd, byte, 1) : read(fd, byte, 1);
        if (done == 1) return 0;
        if (done < 0 && errno == EINTR) continue;
        return -1;
    }
}

int main(int argc, char **argv) {
    int preempt = argc == 2 && strcmp(argv[1], "--preempt") == 0;
    if (argc > 2 || (argc == 2 && !preempt)) {
        fprintf(stderr, "host_sentinel: the only option is --preempt\n");
        return 1;
    }
    if (preempt) {  /* before the fork: the child inherits the class */
        struct sched_param param = {.sched_priority = 1};
        if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
            perror("host_sentinel: --preempt: the real-time class (SCHED_FIFO) was refused");
            return 3;
        }
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) { perror("host_sentinel: socketpair"); return 1; }
    pid_t parent = getpid(), child = fork();
    if (child < 0) { perror("host_sentinel: fork"); return 1; }
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        close(pair[0]);
        char byte;
        while (one_byte(pair[1], &byte, 0) == 0 && one_byte(pair[1], &byte, 1) == 0) {}
        _exit(0);
    }
    close(pair[1]);
    char line[256], byte = 'x';
    int status = 0;
    while (fgets(line, sizeof line, stdin)) {
        char *end = NULL;
        long roundtrips = strtol(line, &end, 10);
        pid_t groups[MAX_GROUPS];
        int count = 0;
        while (roundtrips >= 1 && *end == ' ' && count < MAX_GROUPS) {
            char *next = NULL;
            long group = strtol(end, &next, 10);
            if (next == end || group <= 1) break;
            groups[count++] = (pid_t)group;
            end = next;
        }
        if (roundtrips < 1 || (*end != '\n' && *end != '\0')) {
            fprintf(stderr, "host_sentinel: expected a count of roundtrips and at most %d process groups per line, "
                    "got %s", MAX_GROUPS, line);
            status = 1;
            break;
        }
        long long pause_began = now_ns();
        if (!preempt)
            for (int i = 0; i < count; i++) kill(-groups[i], SIGSTOP);  /* a group that has ended: nothing to stop */
        long long began = now_ns();
        for (long i = 0; i < roundtrips; i++) {
            if (one_byte(pair[0], &byte, 1) != 0 || one_byte(pair[0], &byte, 0) != 0) {
                for (int j = 0; j < count; j++) kill(-groups[j], SIGCONT);
                perror("host_sentinel: the child stopped answering");
                status = 1;
                goto done;
            }
        }
        long long slice = now_ns() - began;
        for (int i = 0; i < count; i++) kill(-groups[i], SIGCONT);
        if (count) printf("%lld %lld\n", slice, now_ns() - pause_began);
        else printf("%lld\n", slice);
        fflush(stdout);
    }
done:
    close(pair[0]);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return status;
}
