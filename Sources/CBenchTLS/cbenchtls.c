#include "cbenchtls.h"
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>

void *cbenchtls_ctx_new(const char *ca_file) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) return NULL;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int ok = ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) { SSL_CTX_free(ctx); return NULL; }
    // A partial write leaves the rest to the next call with the same buffer moved on.
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

void cbenchtls_ctx_free(void *ctx) { SSL_CTX_free(ctx); }

void *cbenchtls_new(void *ctx, int fd, const char *host) {
    SSL *ssl = SSL_new(ctx);
    if (!ssl) return NULL;
    // An address is checked against the certificate's IP names and sent without SNI (RFC 6066
    // allows host names only); a name is checked against its DNS names and sent as SNI.
    unsigned char addr[16];
    int is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    int ok = SSL_set_fd(ssl, fd) == 1 &&
        (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1
               : SSL_set_tlsext_host_name(ssl, host) == 1 && SSL_set1_host(ssl, host) == 1);
    if (!ok) { SSL_free(ssl); return NULL; }
    SSL_set_connect_state(ssl);
    return ssl;
}

void cbenchtls_free(void *ssl) { SSL_free(ssl); }

static int classify(SSL *ssl, int rc) {
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ: return CBENCHTLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return CBENCHTLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return CBENCHTLS_CLOSED;
    default: ERR_clear_error(); return CBENCHTLS_ERROR;
    }
}

int cbenchtls_handshake(void *ssl) {
    int rc = SSL_do_handshake(ssl);
    return rc == 1 ? CBENCHTLS_DONE : classify(ssl, rc);
}

ssize_t cbenchtls_read(void *ssl, void *buf, size_t len) {
    size_t n = 0;
    int rc = SSL_read_ex(ssl, buf, len, &n);
    return rc == 1 ? (ssize_t)n : classify(ssl, rc);
}

ssize_t cbenchtls_write(void *ssl, const void *buf, size_t len) {
    size_t n = 0;
    int rc = SSL_write_ex(ssl, buf, len, &n);
    return rc == 1 ? (ssize_t)n : classify(ssl, rc);
}

int cbenchtls_pending(void *ssl) { return SSL_pending(ssl); }
const char *cbenchtls_version(void *ssl) { return SSL_get_version(ssl); }
const char *cbenchtls_cipher(void *ssl) { return SSL_get_cipher_name((SSL *)ssl); }
