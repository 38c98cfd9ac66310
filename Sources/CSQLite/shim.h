#ifndef RIDEPUSH_CSQLITE_SHIM_H
#define RIDEPUSH_CSQLITE_SHIM_H
// Why this shim exists: SQLITE_TRANSIENT is a cast of -1 to a function pointer, a macro
// Swift cannot import; bind calls that copy their argument use these wrappers.
#include <sqlite3.h>

static inline int csqlite_bind_text(sqlite3_stmt *s, int i, const char *text, int n) {
    return sqlite3_bind_text(s, i, text, n, SQLITE_TRANSIENT);
}

static inline int csqlite_bind_blob(sqlite3_stmt *s, int i, const void *bytes, int n) {
    return sqlite3_bind_blob(s, i, bytes, n, SQLITE_TRANSIENT);
}

#endif
