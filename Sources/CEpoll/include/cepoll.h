#ifndef CEPOLL_H
#define CEPOLL_H
/* <sys/epoll.h> for Swift (Glibc's module map leaves it out), as swift-nio's CNIOLinux does:
 * the real struct epoll_event (packed on x86_64) and constants, no hand-made layout. */
#include <stdint.h>
#include <sys/epoll.h>

static const uint32_t CEPOLL_IN = EPOLLIN;
static const uint32_t CEPOLL_OUT = EPOLLOUT;
static const uint32_t CEPOLL_ERR = EPOLLERR;
static const uint32_t CEPOLL_HUP = EPOLLHUP;
static const int CEPOLL_CTL_ADD = EPOLL_CTL_ADD;
static const int CEPOLL_CTL_DEL = EPOLL_CTL_DEL;
static const int CEPOLL_CTL_MOD = EPOLL_CTL_MOD;

static inline int cepoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static inline int cepoll_ctl(int epfd, int op, int fd, uint32_t events, uint32_t token) {
    struct epoll_event ev = { .events = events, .data = { .u64 = token } };
    return epoll_ctl(epfd, op, fd, &ev);
}

/* `buffer` holds `capacity` events of cepoll_event_size() bytes each. */
static inline int cepoll_wait(int epfd, void *buffer, int capacity, int timeout_ms) {
    return epoll_wait(epfd, (struct epoll_event *)buffer, capacity, timeout_ms);
}

static inline int cepoll_event_size(void) { return (int)sizeof(struct epoll_event); }
static inline uint32_t cepoll_event_events(const void *buffer, int i) { return ((const struct epoll_event *)buffer)[i].events; }
static inline uint32_t cepoll_event_token(const void *buffer, int i) { return (uint32_t)((const struct epoll_event *)buffer)[i].data.u64; }
#endif
