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

// sqlite3_config and sqlite3_db_config are variadic, which Swift cannot call.
// Memory statistics off: with them on, every SQLite malloc and free takes a global mutex.
// Must run before the first connection opens (SQLITE_MISUSE after).
static inline int csqlite_config_no_memstatus(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

// The connection's lookaside pool: `count` slots of `size` bytes for its small allocations.
static inline int csqlite_db_lookaside(sqlite3 *db, int size, int count) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_LOOKASIDE, (void *)0, size, count);
}

#endif
