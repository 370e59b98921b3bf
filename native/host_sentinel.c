/* The host sentinel: how fast this CPU runs a serial ping-pong right now, with nothing of ours but itself on it.
 * Two processes, this one and a child, pass one byte back and forth over a Unix socketpair; both inherit the CPU
 * affinity they are started with (the caller pins them to one CPU). Each line "N" on stdin runs N roundtrips and
 * prints their total in ns on stdout. A roundtrip is two context switches and four system calls, all kernel and
 * scheduler work, the kind of work that dominates a ping-pong on one CPU; no network, no allocation.
 * The child dies with the parent (PR_SET_PDEATHSIG) and at the end of stdin; exit codes: 0, 1 on a system error.
 * Used by benchmarks/host_modes.py.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

int main(void) {
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
    char line[64], byte = 'x';
    int status = 0;
    while (fgets(line, sizeof line, stdin)) {
        char *end = NULL;
        long roundtrips = strtol(line, &end, 10);
        if (roundtrips < 1 || (*end != '\n' && *end != '\0')) {
            fprintf(stderr, "host_sentinel: expected a count of roundtrips per line, got %s", line);
            status = 1;
            break;
        }
        long long began = now_ns();
        for (long i = 0; i < roundtrips; i++) {
            if (one_byte(pair[0], &byte, 1) != 0 || one_byte(pair[0], &byte, 0) != 0) {
                perror("host_sentinel: the child stopped answering");
                status = 1;
                goto done;
            }
        }
        printf("%lld\n", now_ns() - began);
        fflush(stdout);
    }
done:
    close(pair[0]);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return status;
}
