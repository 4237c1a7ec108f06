/*
 * washout's launcher: a small long-lived process that starts trials for washout, so a
 * trial is started from a process of about a megabyte rather than from washout's Python
 * (about a hundred), and is timed here, around its start and its exit, in C.
 *
 * Why it exists (docs/design.md, "The launcher"):
 * - Linux's execve records the high-water RSS of the memory it leaves in the process's
 *   maxrss (fs/exec.c, exec_mmap: setmax_mm_hiwater_rss(&tsk->signal->maxrss, old_mm)), and
 *   a vfork child leaves its parent's memory: a command started by washout reported
 *   washout's peak as its own. Started from here, it reports at most this process's.
 * - The wall time runs from just before vfork to just after waitid sees the exit (as
 *   hyperfine's clock runs around its spawn and wait), with none of washout's work inside.
 *
 * Protocol, on a unix stream socket (its descriptor is argv[1]), native byte order:
 *   request:  header of six uint32 (payload length, argc, envc, flags, descriptors, 0),
 *             sent with the trial's stdin, stdout and stderr (or stdout and stderr, or
 *             stderr only; /dev/null for those not sent) as SCM_RIGHTS, then
 *             the payload: executable, working directory ("" for none), CPUs (a comma list,
 *             "" for none), argv[argc], env[envc], each NUL-terminated.
 *   replies:  ten int64 each: kind (1 started, 2 finished), pid, errno (with the step that
 *             failed: 1 chdir, 2 exec, 3 affinity, 4 vfork), wait status, wall ns, user ns,
 *             system ns, max RSS KiB, involuntary switches, CPU migrations (-1: not read).
 * Flags: 1 read the CPU migrations of the exited process (/proc/PID/sched) before reaping;
 *        2 keep the launcher's session and process group (no setsid); without it, what the
 *        command left in its process group is SIGKILLed once it has exited, before the
 *        finished reply.
 * End of file on the socket ends the launcher.
 *
 * One-shot mode, for an SSH worker's runner: `launch --once MARK PROGRAM ARG...` runs one
 * command (PROGRAM looked up on PATH) in the caller's process group (timeout(1)'s), with
 * /dev/null as stdin and this stdout and stderr, through run(), then writes one line on stderr,
 * "MARKrun STATUS WALL_NS USER_NS SYSTEM_NS MAXRSS_KIB NIVCSW", and exits as a shell
 * would (the exit code, or 128 + the signal); 127 when PROGRAM is not on PATH.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int SOCK;

enum { MAX_FDS = 3, STEP_CHDIR = 1, STEP_EXEC = 2, STEP_AFFINITY = 3, STEP_FORK = 4 };
enum { STARTED = 1, FINISHED = 2, BATCH_END = 3 };
enum { HEALTH = 1, KEEP_SESSION = 2, BATCH = 4 };

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static void reply(const int64_t r[10]) {
    const char *p = (const char *)r;
    size_t n = 10 * sizeof(int64_t);
    while (n > 0) {
        ssize_t put = write(SOCK, p, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) exit(0); /* washout is gone */
        p += put;
        n -= (size_t)put;
    }
}

static int64_t migrations(pid_t pid) {
    char path[64], text[16384];
    snprintf(path, sizeof path, "/proc/%d/sched", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    char *at = strstr(text, "\nse.nr_migrations");
    if (at == NULL) return -1;
    char *colon = strchr(at + 1, ':');
    if (colon == NULL) return -1;
    return strtoll(colon + 1, NULL, 10);
}

/* Set by the vfork child (which shares this memory) when it cannot exec. */
static volatile int child_errno, child_step;
/* This process's CPUs as it started (a command without CPUs of its own runs on them), and
 * /dev/null, opened once for every command's stdin (and stdout when it is not kept). */
static cpu_set_t own_cpus;
static int own_cpus_read, null_fd = -1;

static void close_all(int fds[], int nfds) {
    for (int i = 0; i < nfds; i++) close(fds[i]);
}

/* A command as a request gives it: its executable, directory ("" for none), CPUs (a comma
 * list, "" for none), argv and env, pointing into the request's payload. */
struct program {
    char *exe, *cwd, *cpus, **argv, **envp;
};

/* Parse a program from the payload at *p (moved past it); 0, or -1 when out of memory. */
static int program_at(char **p, uint32_t argc, uint32_t envc, struct program *pr) {
    pr->exe = *p;
    pr->cwd = pr->exe + strlen(pr->exe) + 1;
    pr->cpus = pr->cwd + strlen(pr->cwd) + 1;
    char *q = pr->cpus + strlen(pr->cpus) + 1;
    pr->argv = calloc(argc + 1, sizeof *pr->argv);
    pr->envp = calloc(envc + 1, sizeof *pr->envp);
    if (pr->argv == NULL || pr->envp == NULL) return -1;
    for (uint32_t i = 0; i < argc; i++, q += strlen(q) + 1) pr->argv[i] = q;
    for (uint32_t i = 0; i < envc; i++, q += strlen(q) + 1) pr->envp[i] = q;
    *p = q;
    return 0;
}

static void program_free(struct program *pr) {
    free(pr->argv);
    free(pr->envp);
}

/* Start a program with std: its stdin, stdout and stderr (-1: /dev/null): its pid, *begun
 * the clock just before vfork; -1 with child_step and child_errno set when a step failed
 * (a child that could not exec is reaped). */
static pid_t spawn(const struct program *pr, uint32_t flags, const int std[3], int64_t *begun) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (char *c = pr->cpus; *c;) {
        CPU_SET(strtol(c, &c, 10), &set);
        if (*c == ',') c++;
    }
    child_errno = child_step = 0;
    /* The command's directory and CPUs become this process's own before the clock starts,
     * and the child inherits them: no path lookup or affinity call inside its window (a
     * start by hyperfine has none either). Set for every command: a directory made anew
     * under the same name is entered afresh, and no command inherits the last one's. */
    if (!own_cpus_read) {
        own_cpus_read = sched_getaffinity(0, sizeof own_cpus, &own_cpus) == 0;
    }
    cpu_set_t *want = *pr->cpus ? &set : own_cpus_read ? &own_cpus : NULL;
    if (want != NULL && sched_setaffinity(0, sizeof *want, want) != 0) {
        child_step = STEP_AFFINITY;
    } else if (chdir(*pr->cwd ? pr->cwd : "/") != 0) {
        child_step = STEP_CHDIR;
    }
    if (child_step) {
        child_errno = errno;
        return -1;
    }
    if (null_fd < 0) null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int to[3];
    for (int i = 0; i < 3; i++) to[i] = std[i] < 0 ? null_fd : std[i];
    const int own_session = !(flags & KEEP_SESSION);
    *begun = now_ns();
    pid_t pid = vfork();
    if (pid == 0) { /* async-signal-safe calls only, then exec or _exit */
        if (own_session) setsid();
        signal(SIGPIPE, SIG_DFL); /* this process's own dispositions (vfork shares memory, */
        signal(SIGINT, SIG_DFL);  /* not signal handlers): a command gets the defaults */
        dup2(to[0], 0);
        dup2(to[1], 1);
        dup2(to[2], 2);
        execve(pr->exe, pr->argv, pr->envp);
        child_step = STEP_EXEC;
        child_errno = errno;
        _exit(127);
    }
    if (pid < 0) {
        child_errno = errno;
        child_step = STEP_FORK;
        return -1;
    }
    if (child_step) {
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* After a started command has exited (seen, not reaped): the reply's fields from pid on
 * (pid, 0, 0, status, wall, user, system, max RSS, switches, migrations). */
static void reap(pid_t pid, uint32_t flags, int64_t begun, int64_t exited, int64_t r[10]) {
    int64_t moved = (flags & HEALTH) ? migrations(pid) : -1; /* a zombie's, until reaped */
    /* Whatever the command left running in its group is killed before it is reaped: its
     * zombie keeps the group's id from being reused, and washout need not do it. */
    if (!(flags & KEEP_SESSION)) kill(-pid, SIGKILL);
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    r[1] = pid;
    r[2] = 0;
    r[3] = status;
    r[4] = exited - begun;
    r[5] = (int64_t)ru.ru_utime.tv_sec * 1000000000 + ru.ru_utime.tv_usec * 1000;
    r[6] = (int64_t)ru.ru_stime.tv_sec * 1000000000 + ru.ru_stime.tv_usec * 1000;
    r[7] = ru.ru_maxrss;
    r[8] = ru.ru_nivcsw;
    r[9] = moved;
}

static void run(uint32_t argc, uint32_t envc, uint32_t flags, char *payload, int fds[], int nfds) {
    struct program pr;
    char *p = payload;
    if (program_at(&p, argc, envc, &pr) != 0) exit(1);
    int std[3] = {nfds == 3 ? fds[0] : -1, nfds >= 2 ? fds[nfds - 2] : -1, fds[nfds - 1]};
    int64_t begun = 0, r[10] = {STARTED, 0, 0, 0, 0, 0, 0, 0, 0, -1};
    pid_t pid = spawn(&pr, flags, std, &begun);
    program_free(&pr);
    r[1] = pid;
    if (pid < 0) {
        close_all(fds, nfds);
        r[2] = child_errno;
        r[3] = child_step;
        reply(r);
        return;
    }
    reply(r); /* started: washout registers its group and times it out */
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    int64_t exited = now_ns();
    r[0] = FINISHED;
    reap(pid, flags, begun, exited, r);
    reply(r);
    /* The command's output descriptors are held until its end is timed and told: its exit
     * then closes no pipe washout waits on, so washout does not wake (to read an end of
     * file) on a CPU beside the one that takes the exit's time, and the reply is there to
     * read before the pipes' end (docs/design.md, "The launcher"). */
    close_all(fds, nfds);
}

static int once(int argc, char **argv) {
    const char *mark = argv[0], *name = argv[1], *path = getenv("PATH");
    char exe[4096];
    snprintf(exe, sizeof exe, "%s", name);
    for (const char *dir = path ? path : "/usr/bin:/bin"; !strchr(name, '/');) {
        size_t n = strcspn(dir, ":");
        snprintf(exe, sizeof exe, "%.*s%s%s", (int)n, n ? dir : ".", "/", name);
        if (access(exe, X_OK) == 0) break;
        if (!dir[n]) {
            dprintf(2, "washout: %s: command not found\n", name);
            return 127;
        }
        dir += n + 1;
    }
    extern char **environ;
    uint32_t envc = 0;
    size_t size = strlen(exe) + 4;
    for (int i = 1; i < argc; i++) size += strlen(argv[i]) + 1;
    for (; environ[envc]; envc++) size += strlen(environ[envc]) + 1;
    char *payload = malloc(size), *p = payload;
    p = stpcpy(p, exe) + 1;
    p = stpcpy(p, ".") + 1; /* this directory (run() enters "/" for none) */
    *p++ = 0; /* these CPUs */
    for (int i = 1; i < argc; i++) p = stpcpy(p, argv[i]) + 1;
    for (uint32_t i = 0; i < envc; i++) p = stpcpy(p, environ[i]) + 1;
    int pair[2], fds[2] = {fcntl(1, F_DUPFD_CLOEXEC, 3), fcntl(2, F_DUPFD_CLOEXEC, 3)};
    if (payload == NULL || fds[0] < 0 || fds[1] < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
        return 126;
    SOCK = pair[0]; /* run() replies there; read back below */
    run((uint32_t)argc - 1, envc, KEEP_SESSION, payload, fds, 2);
    int64_t r[10];
    if (read_all(pair[1], r, sizeof r)) return 126;
    if (r[3]) { /* the step that failed */
        dprintf(2, "washout: %s: %s\n", exe, strerror((int)r[2]));
        return r[2] == ENOENT ? 127 : 126;
    }
    if (read_all(pair[1], r, sizeof r)) return 126;
    dprintf(2, "%srun %lld %lld %lld %lld %lld %lld\n", mark, (long long)r[3], (long long)r[4],
            (long long)r[5], (long long)r[6], (long long)r[7], (long long)r[8]);
    int status = (int)r[3];
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* A request's payload (a large environment) raises this process's peak RSS for good, and a
 * vfork child starts with that peak as its own maxrss (see the top): after a large one the
 * memory goes back and the peak is set to what is left (proc(5), clear_refs "5"), so no
 * later command reports the peak of an earlier one's request. */
enum { BIG_PAYLOAD = 1 << 16 };

static void forget_peak(void) {
    malloc_trim(0);
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t put = write(fd, "5", 1);
        (void)put;
        close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "--once") == 0) return once(argc - 2, argv + 2);
    if (argc != 2) return 2;
    SOCK = atoi(argv[1]);
    fcntl(SOCK, F_SETFD, FD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN); /* a reply to a washout that is gone fails; it then exits */
    signal(SIGINT, SIG_IGN);  /* Ctrl-C is washout's to handle */
    for (;;) {
        uint32_t head[6];
        int fds[MAX_FDS], nfds = 0;
        char control[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        struct iovec iov = {head, sizeof head};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t got;
        while ((got = recvmsg(SOCK, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
        }
        if (got <= 0) return 0; /* washout closed its end (or died) */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)nfds);
            }
        }
        if ((size_t)got < sizeof head && read_all(SOCK, (char *)head + got, sizeof head - got))
            return 0;
        char *payload = malloc(head[0] + 1);
        if (payload == NULL || read_all(SOCK, payload, head[0])) return 1;
        payload[head[0]] = 0;
        if (nfds < 1) return 2; /* not washout's request */
        run(head[1], head[2], head[3], payload, fds, nfds);
        free(payload);
        if (head[0] >= BIG_PAYLOAD) forget_peak();
    }
}
