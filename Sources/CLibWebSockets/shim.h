#ifndef RIDEPUSH_CLWS_SHIM_H
#define RIDEPUSH_CLWS_SHIM_H
// Why this shim exists: Swift cannot import C macros with expressions (LWS_PRE) nor
// variadic logging macros (lwsl_*), so each gets a one-line wrapper here.
#include <stddef.h>
#include <sys/socket.h>
#include <libwebsockets.h>

/* malloc_trim is in <malloc.h>, which Glibc's Swift overlay does not include: it hands freed
   heap back after a crowd of connections left (HeapTrim.swift). */
extern int malloc_trim(size_t pad);

static inline size_t clws_pre(void) { return LWS_PRE; }
static inline void clws_log_err(const char *msg) { lwsl_err("%s\n", msg); }
static inline void clws_log_warn(const char *msg) { lwsl_warn("%s\n", msg); }
static inline void clws_log_notice(const char *msg) { lwsl_notice("%s\n", msg); }
static inline void clws_log_user(const char *msg) { lwsl_user("%s\n", msg); }

/* accept4 is a GNU extension Glibc's Swift overlay does not show: a non-blocking,
   close-on-exec socket from the listener in one call.
   Declared here rather than through _GNU_SOURCE, which would change libc's struct definitions
   for this module and clash with Glibc's. */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
static inline int clws_accept(int listen_fd) {
    return accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

#endif
