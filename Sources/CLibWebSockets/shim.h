#ifndef RIDEPUSH_CLWS_SHIM_H
#define RIDEPUSH_CLWS_SHIM_H
// Why this shim exists: Swift cannot import C macros with expressions (LWS_PRE) nor
// variadic logging macros (lwsl_*), so each gets a one-line wrapper here.
#include <libwebsockets.h>

static inline size_t clws_pre(void) { return LWS_PRE; }
static inline void clws_log_err(const char *msg) { lwsl_err("%s\n", msg); }
static inline void clws_log_warn(const char *msg) { lwsl_warn("%s\n", msg); }
static inline void clws_log_notice(const char *msg) { lwsl_notice("%s\n", msg); }
static inline void clws_log_user(const char *msg) { lwsl_user("%s\n", msg); }

#endif
