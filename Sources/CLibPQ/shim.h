#ifndef RIDEPUSH_CLIBPQ_SHIM_H
#define RIDEPUSH_CLIBPQ_SHIM_H
// Why this shim exists: a module map needs a header it can name, and Debian installs
// libpq-fe.h under /usr/include/postgresql (pkg-config libpq adds that directory), so the map
// points here instead of at an absolute path. Nothing else is wrapped: libpq has no macros
// the Swift side needs, and every call goes through RideStore's PostgresConnection.
#include <libpq-fe.h>

#endif
