#ifndef RIDEPUSH_CBENCHTLS_H
#define RIDEPUSH_CBENCHTLS_H
// Why this shim exists: `ridepush bench --url wss://…` speaks TLS on thousands of non-blocking
// sockets from Swift. OpenSSL's SSL_* calls report "would block" through SSL_get_error and a
// few of its setters are macros; these wrappers fold that into plain return codes, and keep
// <openssl/ssl.h> out of Swift (COpenSSL already maps libcrypto's headers into a module).
#include <stddef.h>
#include <sys/types.h>

/// A client context that verifies the server against `ca_file` (a PEM file; NULL: the
/// system's store). NULL on failure.
void *cbenchtls_ctx_new(const char *ca_file);
void cbenchtls_ctx_free(void *ctx);

/// A TLS session on the connected (or connecting) socket `fd`, checking the certificate
/// for `host`. NULL on failure.
void *cbenchtls_new(void *ctx, int fd, const char *host);
void cbenchtls_free(void *ssl);

#define CBENCHTLS_DONE 0
#define CBENCHTLS_WANT_READ (-1)
#define CBENCHTLS_WANT_WRITE (-2)
#define CBENCHTLS_CLOSED (-3)
#define CBENCHTLS_ERROR (-4)

/// One handshake step: DONE, WANT_READ, WANT_WRITE or ERROR.
int cbenchtls_handshake(void *ssl);
/// Bytes read (> 0), or CLOSED, WANT_READ, WANT_WRITE, ERROR.
ssize_t cbenchtls_read(void *ssl, void *buf, size_t len);
/// Bytes written (> 0), or WANT_READ, WANT_WRITE, ERROR.
ssize_t cbenchtls_write(void *ssl, const void *buf, size_t len);
/// Bytes already decrypted and waiting in the session (epoll cannot see them).
int cbenchtls_pending(void *ssl);
/// The negotiated protocol and cipher, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384".
const char *cbenchtls_version(void *ssl);
const char *cbenchtls_cipher(void *ssl);

#endif
