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
 * Flag 4 asks for a batch instead: many trials back to back, each one's record appended to
 * washout's trial journal before the next starts, with no message to washout between them
 * (see batch() below; docs/design.md, "The batch launcher").
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
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

static void put_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t put = write(SOCK, p, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) exit(0); /* washout is gone */
        p += put;
        n -= (size_t)put;
    }
}

static void reply(const int64_t r[10]) { put_all((const char *)r, 10 * sizeof(int64_t)); }

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
/* This process's pid (socket modes), which a command checks is still its parent before
 * it execs. */
static pid_t self;

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
        if (own_session) {
            /* The command dies with this launcher (SIGKILL from the kernel), even when the
             * launcher dies before washout has heard its pid: killed between the vfork and
             * its started reply, it left a command washout could not find, running beside
             * the next trials (docs/design.md, "The launcher"). A launcher already gone: no
             * exec. Not in one-shot mode: timeout(1) signals its group, this process with
             * its command, and a SIGTERM that ends this one leaves the command its grace. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != self) _exit(127);
            setsid();
        }
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


/* ---- Batch mode: trials back to back, with no message to washout between them ---- */

enum { PROBE_BEFORE = 1, PROBE_AFTER = 2, VALUE_MAX = 512, RECORD_MAX = 1 << 16 };
enum { FILE_LIMIT = 1 << 22 }; /* the most of a counters file read, as washout's own reader */
enum {
    END_DONE = 0,      /* every trial ran and is recorded */
    END_STOPPED = 1,   /* washout asked to stop: the last trial is recorded, without a next */
    END_FAILED = 2,    /* the last trial's exit status was not 0 (not recorded) */
    END_OUTPUT = 3,    /* the last trial wrote to its stdout or stderr (not recorded) */
    END_TIMEOUT = 4,   /* the last trial timed out, its group killed (not recorded) */
    END_KILLED = 5,    /* washout asked to kill the last trial (not recorded) */
    END_UNSTARTED = 6, /* the last trial could not start (errno and step say why) */
    END_JOURNAL = 7,   /* the last trial's record could not be written (errno says why) */
};
enum { M_STATUS, M_WALL, M_USER, M_SYSTEM, M_RSS, M_SWITCHES, M_MIGRATIONS, M_STARTED, M_ENDED,
       M_NOW, M_PID, MEASURES };

struct probe {
    char kind, when;
    const char *path, *arg;
    int fd, fd2, swapless;
    int shares; /* an 'L' probe of the file the probe before it reads, at the same moments:
                 * its line is taken from that read (/proc/stat is read once a side, not
                 * once a CPU, as washout's own health reader reads it) */
    char value[2][VALUE_MAX]; /* as JSON, before and after the trial */
};

static char *file_buf;
static size_t file_cap;
static ssize_t file_len = -1; /* what the last read_whole() gave */

/* The whole of a counters file (made anew at every read: read at once, into a buffer a
 * little larger than it was last time); its length, or -1. */
static ssize_t read_whole(int fd) {
    file_len = -1;
    for (;;) {
        if (file_cap == 0 || file_buf == NULL) {
            file_cap = 8192;
            file_buf = malloc(file_cap);
            if (file_buf == NULL) return -1;
        }
        ssize_t n = pread(fd, file_buf, file_cap - 1, 0);
        if (n < 0) return -1;
        if ((size_t)n < file_cap - 1 || file_cap >= FILE_LIMIT) {
            file_buf[n] = 0;
            file_len = n;
            return n;
        }
        char *bigger = realloc(file_buf, file_cap * 2);
        if (bigger == NULL) return -1;
        file_buf = bigger;
        file_cap *= 2;
    }
}

/* Text as a JSON string into out (VALUE_MAX): "null" for text that is not ASCII or too long. */
static void json_text(char *out, const char *text, size_t n) {
    size_t k = 0;
    out[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (k + 8 >= VALUE_MAX || c >= 0x80) {
            strcpy(out, "null");
            return;
        }
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c < 0x20) {
            k += (size_t)sprintf(out + k, "\\u%04x", c);
        } else {
            out[k++] = (char)c;
        }
    }
    out[k++] = '"';
    out[k] = 0;
}

/* The line of the text that starts with prefix (at its start or after a newline). */
static const char *line_of(const char *text, const char *prefix, size_t *n) {
    size_t plen = strlen(prefix);
    const char *at = text;
    if (strncmp(text, prefix, plen) != 0) {
        char needle[256];
        if (plen + 2 > sizeof needle) return NULL;
        needle[0] = '\n';
        memcpy(needle + 1, prefix, plen + 1);
        at = strstr(text, needle);
        if (at == NULL) return NULL;
        at++;
    }
    const char *end = strchr(at, '\n');
    *n = end ? (size_t)(end - at) : strlen(at);
    return at;
}

static int open_counter(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void probe_open(struct probe *pb) {
    pb->fd = pb->fd2 = -1;
    pb->swapless = 0;
    strcpy(pb->value[0], "null");
    strcpy(pb->value[1], "null");
    if (pb->kind == 'K') { /* the kernel log from its end: no earlier record counts */
        int fd = open(pb->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode))) {
            close(fd);
            fd = -1;
        }
        if (fd >= 0) lseek(fd, 0, SEEK_END);
        pb->fd = fd;
        return;
    }
    pb->fd = open_counter(pb->path);
    if (pb->kind == 'W') pb->fd2 = open_counter(pb->arg);
}

static void probe_close(struct probe *pb) {
    if (pb->fd >= 0) close(pb->fd);
    if (pb->fd2 >= 0) close(pb->fd2);
}

/* One reading of a probe into its value (which: 0 before the trial, 1 after):
 *   'L' the line of PATH starting with ARG, a string;
 *   'M' the 8 bytes of PATH at offset ARG (an MSR, msr(4)), an unsigned integer;
 *   'K' the records written to the kernel log PATH since the last reading, an integer;
 *   'W' the "pswpin" and "pswpout" lines of the vmstat file ARG, as one string, read
 *       only when the swaps file PATH lists a device now or did at the last reading
 *       (without one they cannot move, and the last value stands).
 * null where it cannot be read. */
static void probe_read(struct probe *pb, int which) {
    char *v = pb->value[which];
    if (pb->kind == 'W') {
        char swaps[4096];
        ssize_t n = pb->fd < 0 ? -1 : pread(pb->fd, swaps, sizeof swaps, 0);
        int lines = 0;
        for (ssize_t i = 0; i < n; i++) lines += swaps[i] == '\n';
        int swapless = n >= 0 && lines <= 1;
        const char *last = pb->value[1 - which];
        if (swapless && pb->swapless && strcmp(last, "null") != 0) {
            strcpy(v, last);
        } else {
            strcpy(v, "null");
            size_t ni = 0, no = 0;
            const char *in, *out;
            if (pb->fd2 >= 0 && read_whole(pb->fd2) >= 0 &&
                (in = line_of(file_buf, "pswpin ", &ni)) != NULL &&
                (out = line_of(file_buf, "pswpout ", &no)) != NULL) {
                char both[VALUE_MAX];
                if (ni + no + 1 < sizeof both) {
                    memcpy(both, in, ni);
                    both[ni] = '\n';
                    memcpy(both + ni + 1, out, no);
                    json_text(v, both, ni + no + 1);
                }
            }
        }
        pb->swapless = swapless;
        return;
    }
    strcpy(v, "null");
    if (pb->fd < 0) return;
    if (pb->kind == 'L') {
        size_t n = 0;
        const char *line;
        if ((pb->shares ? file_len : read_whole(pb->fd)) >= 0 &&
            (line = line_of(file_buf, pb->arg, &n)) != NULL)
            json_text(v, line, n);
    } else if (pb->kind == 'M') {
        uint64_t x;
        if (pread(pb->fd, &x, 8, strtoll(pb->arg, NULL, 10)) == 8)
            snprintf(v, VALUE_MAX, "%llu", (unsigned long long)x);
    } else if (pb->kind == 'K') {
        struct pollfd p = {pb->fd, POLLIN, 0};
        long records = 0;
        char record[8192];
        if (poll(&p, 1, 0) > 0) { /* a record since (dev-kmsg: poll as read sees it) */
            for (;;) {
                ssize_t n = read(pb->fd, record, sizeof record); /* one record per read */
                if (n > 0) {
                    records++;
                } else if (n < 0 && errno == EPIPE) {
                    continue; /* records overwritten before they were read: go on */
                } else if (n < 0 && errno != EAGAIN) {
                    return; /* unreadable: null */
                } else {
                    break;
                }
            }
        }
        snprintf(v, VALUE_MAX, "%ld", records);
    }
}

/* A template filled in: its bytes, each hole (HOLE, a code, an index) replaced by
 * 'n' a measure (M_...) as an integer, 's' one in ns as seconds (exact: nine decimals),
 * 'k' one in KiB as bytes, 't' a real-time clock reading (ns) as the store writes a time
 * (a JSON string, ISO 8601 in UTC to the microsecond), 'b' or 'a' a probe's value before or
 * after the trial, 'c' one of the batch's constants (text the same in many records, sent
 * once).
 * The length, or -1 when it does not fit. */
enum { HOLE = 1 };
static ssize_t fill(char *out, size_t cap, const char *t, size_t n, const int64_t m[],
                    const struct probe *probes, uint32_t nprobes, char *const constants[],
                    uint32_t nconstants) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] != HOLE || i + 2 >= n) {
            if (k + 1 > cap) return -1;
            out[k++] = t[i];
            continue;
        }
        char code = t[i + 1];
        unsigned idx = (unsigned char)t[i + 2];
        i += 2;
        char number[96];
        const char *v = number;
        if (code == 'n' && idx < MEASURES) {
            snprintf(number, sizeof number, "%lld", (long long)m[idx]);
        } else if (code == 's' && idx < MEASURES && m[idx] >= 0) {
            snprintf(number, sizeof number, "%lld.%09lld", (long long)(m[idx] / 1000000000),
                     (long long)(m[idx] % 1000000000));
        } else if (code == 'k' && idx < MEASURES) {
            snprintf(number, sizeof number, "%lld", (long long)m[idx] * 1024);
        } else if (code == 't' && idx < MEASURES && m[idx] >= 0) {
            time_t seconds = (time_t)(m[idx] / 1000000000);
            struct tm at;
            gmtime_r(&seconds, &at);
            snprintf(number, sizeof number, "\"%04d-%02d-%02dT%02d:%02d:%02d.%06lld+00:00\"",
                     at.tm_year + 1900, at.tm_mon + 1, at.tm_mday, at.tm_hour, at.tm_min,
                     at.tm_sec, (long long)(m[idx] % 1000000000 / 1000));
        } else if ((code == 'b' || code == 'a') && idx < nprobes) {
            v = probes[idx].value[code == 'a'];
        } else if (code == 'c' && idx < nconstants) {
            v = constants[idx];
        } else {
            return -1;
        }
        size_t len = strlen(v);
        if (k + len > cap) return -1;
        memcpy(out + k, v, len);
        k += len;
    }
    return (ssize_t)k;
}

static int64_t realtime_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether a trial wrote to the output file fd (or it cannot be told). */
static int wrote(int fd) {
    struct stat st;
    return fstat(fd, &st) != 0 || st.st_size > 0;
}

/* What washout said during a batch: 's' stop after this trial, 'k' kill the trial in flight;
 * end of file: washout is gone. */
static int heard_stop, heard_kill;

static void hear(void) {
    char c[16];
    ssize_t n = read(SOCK, c, sizeof c);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        heard_kill = heard_stop = 2; /* gone */
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (c[i] == 's') heard_stop = 1;
        if (c[i] == 'k') heard_kill = heard_stop = 1;
    }
}

/* Wait for a started trial to exit (seen, not reaped): 0 when it did, END_TIMEOUT or
 * END_KILLED when its group was killed first; *exited the clock just after. */
static int wait_trial(pid_t pid, int pidfd, int64_t deadline, int64_t *exited) {
    struct pollfd p[2] = {{pidfd, POLLIN, 0}, {SOCK, POLLIN, 0}};
    int why = 0;
    while (why == 0) {
        int ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ns();
            ms = left <= 0 ? 0 : (int)(left / 1000000 + 1);
        }
        int n = poll(p, 2, ms);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0 && p[0].revents) {
            *exited = now_ns();
            return 0;
        }
        if (n == 0 && deadline >= 0 && now_ns() >= deadline) why = END_TIMEOUT;
        if (n > 0 && p[1].revents) {
            hear();
            if (heard_kill) why = END_KILLED;
        }
    }
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    *exited = now_ns();
    return why;
}

/* A batch request (flag BATCH): header (payload length, programs, trials, flags, probes,
 * constants),
 * with the journal's descriptor (opened for appending) and the trials' stdout and stderr
 * (files: a trial after which one is not empty ends the batch) as SCM_RIGHTS; payload:
 *   probes:   kind and when (PROBE_BEFORE, PROBE_AFTER: 1 byte each), path, argument;
 *   constants: what a template's 'c' holes put in, each NUL-terminated;
 *   programs: argc and envc (uint32 each), then as a request's payload;
 *   trials:   program (uint32), timeout (int64 ns, -1 for none), the lengths of its two
 *             templates (uint32 each), then the templates: the record of its end, and what
 *             follows it when the batch goes on (the next trial's start).
 * Each trial, in turn: the probes read before it, it runs (stdin /dev/null), the
 * probes read after it; then its record is written with one write(2), its end and, unless
 * washout asked to stop or it was the last, the next one's start. The batch ends at the
 * first trial that is not ok (its record not written: sent back, filled in, in the end
 * reply), or at washout's 's'; 'k' kills the trial in flight. The end reply: int64 kind
 * (BATCH_END), trials recorded, why (END_...), errno, step, the last trial's measures
 * (M_...), and the length of its record sent back, then that record. */
static void batch(uint32_t nprograms, uint32_t ntrials, uint32_t flags, uint32_t nprobes,
                  uint32_t nconstants, char *payload, size_t size, int fds[], int nfds) {
    int journal = fds[0], out_fd = fds[1], err_fd = fds[2];
    char *p = payload, *end = payload + size;
    struct probe *probes = calloc(nprobes + 1, sizeof *probes);
    struct program *programs = calloc(nprograms + 1, sizeof *programs);
    char **constants = calloc(nconstants + 1, sizeof *constants);
    static char record[RECORD_MAX];
    int64_t m[MEASURES] = {0}, head[5 + MEASURES + 1] = {BATCH_END, 0, 0, 0, 0};
    if (nfds != 3 || probes == NULL || programs == NULL || constants == NULL) exit(1);
    for (uint32_t i = 0; i < nprobes; i++) {
        probes[i].kind = *p++;
        probes[i].when = *p++;
        probes[i].path = p;
        p += strlen(p) + 1;
        probes[i].arg = p;
        p += strlen(p) + 1;
        probe_open(&probes[i]);
        probes[i].shares = i > 0 && probes[i].kind == 'L' && probes[i - 1].kind == 'L' &&
                           probes[i].when == probes[i - 1].when && probes[i].fd >= 0 &&
                           probes[i - 1].fd >= 0 &&
                           strcmp(probes[i].path, probes[i - 1].path) == 0;
    }
    for (uint32_t i = 0; i < nconstants; i++) {
        constants[i] = p;
        p += strlen(p) + 1;
    }
    for (uint32_t i = 0; i < nprograms; i++) {
        uint32_t counts[2];
        memcpy(counts, p, sizeof counts);
        p += sizeof counts;
        if (program_at(&p, counts[0], counts[1], &programs[i]) != 0) exit(1);
    }
    struct stat st;
    off_t journal_size = fstat(journal, &st) == 0 ? st.st_size : 0;
    heard_stop = heard_kill = 0;
    ssize_t unwritten = 0;
    uint32_t done = 0;
    int why = END_DONE;
    for (uint32_t t = 0; t < ntrials && p < end; t++) {
        uint32_t program, lengths[2];
        int64_t timeout;
        memcpy(&program, p, 4);
        memcpy(&timeout, p + 4, 8);
        memcpy(lengths, p + 12, 8);
        const char *finish = p + 20, *next = finish + lengths[0];
        p = (char *)next + lengths[1];
        for (uint32_t i = 0; i < nprobes; i++)
            if (probes[i].when & PROBE_BEFORE) probe_read(&probes[i], 0);
        memset(m, 0, sizeof m);
        m[M_MIGRATIONS] = -1;
        m[M_STARTED] = realtime_ns();
        int std[3] = {-1, out_fd, err_fd};
        int64_t begun = 0, exited = 0, r[10];
        pid_t pid = program < nprograms ? spawn(&programs[program], flags, std, &begun) : -1;
        if (pid < 0) {
            head[3] = program < nprograms ? child_errno : EINVAL;
            head[4] = program < nprograms ? child_step : STEP_EXEC;
            why = END_UNSTARTED;
            break;
        }
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) { /* washout asks for batches only where pidfds are */
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        int killed = wait_trial(pid, pidfd, timeout < 0 ? -1 : begun + timeout, &exited);
        if (pidfd >= 0) close(pidfd);
        m[M_ENDED] = realtime_ns();
        reap(pid, flags, begun, exited, r);
        m[M_PID] = r[1];
        m[M_STATUS] = r[3];
        m[M_WALL] = r[4];
        m[M_USER] = r[5];
        m[M_SYSTEM] = r[6];
        m[M_RSS] = r[7];
        m[M_SWITCHES] = r[8];
        m[M_MIGRATIONS] = r[9];
        if (heard_stop == 2) exit(0); /* washout is gone: its trial's group was killed */
        for (uint32_t i = 0; i < nprobes; i++)
            if (probes[i].when & PROBE_AFTER) probe_read(&probes[i], 1);
        struct pollfd ask = {SOCK, POLLIN, 0};
        if (!heard_stop && poll(&ask, 1, 0) > 0) hear();
        if (heard_stop == 2) exit(0);
        m[M_NOW] = realtime_ns();
        int last = t + 1 == ntrials || heard_stop;
        ssize_t n = fill(record, sizeof record, finish, lengths[0], m, probes, nprobes, constants,
                         nconstants);
        ssize_t n2 = n < 0 || last ? 0
                                   : fill(record + n, sizeof record - (size_t)n, next, lengths[1],
                                          m, probes, nprobes, constants, nconstants);
        why = killed            ? killed
              : r[3] != 0       ? END_FAILED
              : wrote(out_fd) || wrote(err_fd) ? END_OUTPUT
              : n < 0 || n2 < 0 ? END_JOURNAL
                                : END_DONE;
        if (n < 0 || n2 < 0) head[3] = E2BIG;
        if (why != END_DONE) {
            unwritten = n < 0 ? 0 : n;
            break;
        }
        ssize_t put = write(journal, record, (size_t)(n + n2));
        if (put != n + n2) { /* a record cut short (a full disk) is taken back */
            head[3] = put < 0 ? errno : ENOSPC;
            if (ftruncate(journal, journal_size) != 0) head[4] = errno; /* not a file */
            why = END_JOURNAL;
            unwritten = n;
            break;
        }
        journal_size += put;
        done++;
        if (heard_stop) {
            why = END_STOPPED;
            break;
        }
    }
    for (uint32_t i = 0; i < nprobes; i++) probe_close(&probes[i]);
    for (uint32_t i = 0; i < nprograms; i++) program_free(&programs[i]);
    free(probes);
    free(programs);
    free(constants);
    close_all(fds, nfds);
    head[1] = done;
    head[2] = why;
    memcpy(head + 5, m, sizeof m);
    head[5 + MEASURES] = unwritten;
    put_all((const char *)head, sizeof head);
    put_all(record, (size_t)unwritten);
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
    self = getpid();
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
        if (head[3] & BATCH)
            batch(head[1], head[2], head[3], head[4], head[5], payload, head[0], fds, nfds);
        else
            run(head[1], head[2], head[3], payload, fds, nfds);
        free(payload);
        if (head[0] >= BIG_PAYLOAD) forget_peak();
    }
}
