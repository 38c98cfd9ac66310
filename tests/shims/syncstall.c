/* LD_PRELOAD shim for the stalled-disk tests: fsync and fdatasync of a file whose path ends
 * with $SYNCSTALL_SUFFIX (e.g. "rides.db-wal") block while the file named by $SYNCSTALL_FILE
 * exists (at most 120 s), then sync for real. The test creates the file to freeze the disk
 * under the real binary's real sync calls (fsfreeze needs root and a freezable filesystem),
 * and removes it to thaw. Every other descriptor is left alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*sync_fn)(int);

static int matches(int fd) {
    const char *suffix = getenv("SYNCSTALL_SUFFIX");
    if (!suffix || !*suffix) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    size_t ls = strlen(suffix);
    return (size_t)n >= ls && strcmp(target + n - ls, suffix) == 0;
}

static void stall(int fd) {
    const char *gate = getenv("SYNCSTALL_FILE");
    if (!gate || !matches(fd)) return;
    struct timespec step = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 12000 && access(gate, F_OK) == 0; i++) nanosleep(&step, NULL);
}

int fdatasync(int fd) {
    static sync_fn real;
    if (!real) real = (sync_fn)dlsym(RTLD_NEXT, "fdatasync");
    stall(fd);
    return real(fd);
}

int fsync(int fd) {
    static sync_fn real;
    if (!real) real = (sync_fn)dlsym(RTLD_NEXT, "fsync");
    stall(fd);
    return real(fd);
}
