/* LD_PRELOAD shim for the clock-step tests: CLOCK_REALTIME (and gettimeofday, time) read
 * the real clock plus an offset in milliseconds taken from the file named by
 * $CLOCKSTEP_FILE, re-read at most every 20 ms. The test writes the file to step the
 * process's wall clock while it runs. Monotonic clocks are left alone.
 * (libfaketime is not used: it empties Swift's CommandLine.arguments.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
static clock_gettime_fn real_clock_gettime;
static long long offset_ms;      /* accessed with __atomic builtins */
static long long next_read_ns;

static long long mono_ns(void) {
    struct timespec ts;
    real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long current_offset(void) {
    long long now = mono_ns();
    if (now >= __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED)) {
        __atomic_store_n(&next_read_ns, now + 20000000LL, __ATOMIC_RELAXED);
        const char *path = getenv("CLOCKSTEP_FILE");
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            char buf[32];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = 0;
                __atomic_store_n(&offset_ms, strtoll(buf, NULL, 10), __ATOMIC_RELAXED);
            }
        }
    }
    return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
}

static void init(void) {
    if (!real_clock_gettime) real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    init();
    int r = real_clock_gettime(id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_offset() * 1000000LL;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
