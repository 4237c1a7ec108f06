/*
 * The floor of a batch launcher (issue 31): N trials of one program started back to back
 * from this small process, with no Python between them. Each trial is started as washout's
 * launcher starts one (src/washout/harness/launcher/launch.c: vfork, a session of its own,
 * /dev/null as stdin and stdout, timed from just before vfork to just after waitid sees the
 * exit, the group killed, then wait4 for its resources); with HEALTH 1, /proc/stat and cpu0's
 * scaling_cur_freq are read (pread) before and after it, as the health readings read them;
 * with a JOURNAL, one record of its numbers is appended with one write(2), as the trial
 * journal takes a finished trial. stderr goes to /dev/null here (a launcher would keep
 * its tail). Prints the wall per trial in milliseconds.
 *
 * Usage: batch_floor N HEALTH JOURNAL|"" PROGRAM [ARG...]   (bench/engine_overhead.py)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void counters(int stat_fd, int freq_fd, char *into) {
    if (pread(stat_fd, into, 16384, 0) < 0) into[0] = 0;
    if (freq_fd >= 0 && pread(freq_fd, into + 16384, 64, 0) < 0) into[16384] = 0;
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    long n = atol(argv[1]);
    int health = atoi(argv[2]);
    const char *journal = argv[3];
    char **cmd = argv + 4;
    extern char **environ;
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC;
    int jfd = *journal ? open(journal, flags, 0644) : -1;
    int stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    int freq_fd = open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", O_RDONLY | O_CLOEXEC);
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    static char before[16384 + 64], after[16384 + 64], record[512];
    if (n < 1 || stat_fd < 0 || null_fd < 0 || (*journal && jfd < 0)) return 2;
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (health) counters(stat_fd, freq_fd, before);
        int64_t begun = now_ns();
        pid_t pid = vfork();
        if (pid == 0) {
            setsid();
            dup2(null_fd, 0);
            dup2(null_fd, 1);
            dup2(null_fd, 2);
            execve(cmd[0], cmd, environ);
            _exit(127);
        }
        if (pid < 0) return 1;
        siginfo_t info;
        while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0) {
        }
        int64_t exited = now_ns();
        kill(-pid, SIGKILL);
        int status = 0;
        struct rusage ru;
        while (wait4(pid, &status, 0, &ru) < 0) {
        }
        if (health) counters(stat_fd, freq_fd, after);
        if (jfd >= 0) {
            int len = snprintf(record, sizeof record, "[%ld,%d,%lld,%ld,%ld,%ld,%ld,%ld]\n", i,
                               status, (long long)(exited - begun), (long)ru.ru_utime.tv_usec,
                               (long)ru.ru_stime.tv_usec, ru.ru_maxrss, ru.ru_nivcsw,
                               (long)(after[0] + before[0]));
            if (write(jfd, record, (size_t)len) != len) return 1;
        }
    }
    printf("%.6f\n", (double)(now_ns() - t0) / 1e6 / (double)n);
    return 0;
}
