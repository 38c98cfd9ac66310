/* Why this file exists: lws 4.1 as Debian builds it has no external-poll hooks
 * (LWS_WITH_EXTERNAL_POLL is off in lws_config.h, so LWS_CALLBACK_ADD_POLL_FD and the rest are
 * never called), and its service loop calls poll() over every socket of the context. The
 * kernel then walks all of them (sock_poll, tcp_poll, a wait-queue entry each), twice when it
 * sleeps: with 9,500 idle subscribers a thread that is a few percent of the server's CPU.
 *
 * So this file defines poll(). On a service thread that entered a loop (cepoll_loop_enter), a
 * call on lws's pollfd array is answered from an epoll set kept in step with the array: one
 * pass over the array in user space compares each descriptor's events with what the epoll set
 * holds (epoll_ctl only for a change: lws asks for POLLOUT rarely), then epoll_wait with the
 * same timeout, level-triggered as poll is, and the ready ones' revents are set. Every other
 * call (other threads, clients, tests) goes to the kernel's poll as before, through ppoll.
 *
 * A closed socket leaves the epoll set by itself (nothing else holds its file). Its number may
 * come back for a new socket within one lws pass, unseen by the array walk: the accept path
 * forgets the number first (cepoll_loop_forget). The listening socket is shared by every
 * thread (its file stays open), so it is watched here directly and never through lws.
 *
 * A socket marked as awaiting a request (cepoll_loop_mark_request) that reads ready is shown
 * to the loop's hook before poll() returns, so before lws reads it: the hook may peek at the
 * request line lws is about to parse (RequestLineNUL.swift says why). */
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include "cepoll_loop.h"

#define LISTENER_TOKEN ((uint64_t)1 << 32)
#define REGISTERED 0x8000u
#define MAX_EVENTS 512

struct cepoll_loop {
    int epfd;
    int listening;
    int listener_ready;
    const struct pollfd *fds;   /* lws's array, learned at its first call */
    unsigned cap;               /* entries in reg and pos, by descriptor number */
    uint16_t *reg;              /* events in the epoll set | REGISTERED, 0 if none */
    uint32_t *pos;              /* index in the array at the latest call */
    uint8_t *awaiting;          /* 1: awaiting a request, shown to the hook when readable */
    cepoll_request_hook hook;
    void *hook_ctx;
    struct epoll_event ev[MAX_EVENTS];
};

static __thread cepoll_loop *current;

static int kernel_poll(struct pollfd *fds, nfds_t nfds, int timeout) {
    if (timeout < 0) return ppoll(fds, nfds, NULL, NULL);
    struct timespec ts = { .tv_sec = timeout / 1000, .tv_nsec = (long)(timeout % 1000) * 1000000L };
    return ppoll(fds, nfds, &ts, NULL);
}

cepoll_loop *cepoll_loop_new(void) {
    cepoll_loop *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) { free(l); return NULL; }
    return l;
}

void cepoll_loop_free(cepoll_loop *l) {
    if (!l) return;
    if (current == l) current = NULL;
    close(l->epfd);
    free(l->reg);
    free(l->pos);
    free(l->awaiting);
    free(l);
}

void cepoll_loop_enter(cepoll_loop *l) { current = l; }

int cepoll_loop_listen(cepoll_loop *l, int fd, int on) {
    if (!l) { errno = EINVAL; return -1; }
    if (!on == !l->listening) return 0;
    struct epoll_event e = { .events = EPOLLIN, .data = { .u64 = LISTENER_TOKEN } };
    if (epoll_ctl(l->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &e) < 0) return -1;
    l->listening = on;
    if (!on) l->listener_ready = 0;
    return 0;
}

int cepoll_loop_take_listener(cepoll_loop *l) {
    if (!l || !l->listener_ready) return 0;
    l->listener_ready = 0;
    return 1;
}

void cepoll_loop_forget(cepoll_loop *l, int fd) {
    if (l && fd >= 0 && (unsigned)fd < l->cap) { l->reg[fd] = 0; l->awaiting[fd] = 0; }
}

static int grow(cepoll_loop *l, int fd);

void cepoll_loop_set_request_hook(cepoll_loop *l, cepoll_request_hook hook, void *ctx) {
    if (!l) return;
    l->hook = hook;
    l->hook_ctx = ctx;
}

int cepoll_loop_mark_request(cepoll_loop *l, int fd, int on) {
    if (!l || fd < 0) { errno = EINVAL; return -1; }
    if ((unsigned)fd >= l->cap) {
        if (!on) return 0;
        if (grow(l, fd) < 0) return -1;
    }
    l->awaiting[fd] = on ? 1 : 0;
    return 0;
}

static int grow(cepoll_loop *l, int fd) {
    unsigned cap = l->cap ? l->cap : 1024;
    while (cap <= (unsigned)fd) cap *= 2;
    uint16_t *reg = realloc(l->reg, cap * sizeof *reg);
    if (!reg) return -1;
    l->reg = reg;
    uint32_t *pos = realloc(l->pos, cap * sizeof *pos);
    if (!pos) return -1;
    l->pos = pos;
    uint8_t *awaiting = realloc(l->awaiting, cap * sizeof *awaiting);
    if (!awaiting) return -1;
    l->awaiting = awaiting;
    memset(l->reg + l->cap, 0, (cap - l->cap) * sizeof *reg);
    memset(l->awaiting + l->cap, 0, (cap - l->cap) * sizeof *awaiting);
    l->cap = cap;
    return 0;
}

/* Brings the epoll set's entry for `fd` to `want`; -1 if epoll cannot watch it. */
static int sync_fd(cepoll_loop *l, int fd, uint16_t want) {
    struct epoll_event e = { .events = want & ~REGISTERED, .data = { .u64 = (uint64_t)(uint32_t)fd } };
    int op = l->reg[fd] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(l->epfd, op, fd, &e) < 0) {
        if (errno == ENOENT) op = EPOLL_CTL_ADD;       /* its old socket closed, a new one took the number */
        else if (errno == EEXIST) op = EPOLL_CTL_MOD;  /* registered from an earlier life of the number */
        else return -1;
        if (epoll_ctl(l->epfd, op, fd, &e) < 0) return -1;
    }
    l->reg[fd] = want;
    return 0;
}

static int loop_poll(cepoll_loop *l, struct pollfd *fds, nfds_t nfds, int timeout) {
    for (nfds_t i = 0; i < nfds; i++) {
        int fd = fds[i].fd;
        fds[i].revents = 0;
        if (fd < 0) continue;
        if ((unsigned)fd >= l->cap && grow(l, fd) < 0) return kernel_poll(fds, nfds, timeout);
        uint16_t want = (uint16_t)((fds[i].events & (POLLIN | POLLPRI | POLLOUT | POLLRDHUP)) | REGISTERED);
        /* Not a socket epoll can watch (a regular file): let the kernel answer this call. */
        if (l->reg[fd] != want && sync_fd(l, fd, want) < 0) return kernel_poll(fds, nfds, timeout);
        l->pos[fd] = (uint32_t)i;
    }
    int n = epoll_wait(l->epfd, l->ev, MAX_EVENTS, timeout);
    if (n < 0) return -1;
    int ready = 0;
    for (int k = 0; k < n; k++) {
        uint64_t token = l->ev[k].data.u64;
        if (token == LISTENER_TOKEN) { l->listener_ready = 1; continue; }
        int fd = (int)token;
        if ((unsigned)fd >= l->cap) continue;
        uint32_t i = l->pos[fd];
        if (i >= nfds || fds[i].fd != fd) continue;
        fds[i].revents = (short)(l->ev[k].events & ((uint32_t)fds[i].events | POLLERR | POLLHUP));
        if (fds[i].revents) ready++;
        /* The hook runs on this thread, between epoll_wait and lws's read; it only peeks,
           writes on the raw socket and unmarks (never grows the arrays). */
        if ((fds[i].revents & POLLIN) && l->awaiting[fd] && l->hook) l->hook(l->hook_ctx, fd);
    }
    return ready;
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout) {
    cepoll_loop *l = current;
    if (!l || (l->fds && l->fds != fds)) return kernel_poll(fds, nfds, timeout);
    l->fds = fds;
    return loop_poll(l, fds, nfds, timeout);
}
