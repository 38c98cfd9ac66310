#ifndef RIDEPUSH_COPENSSL_SHIM_H
#define RIDEPUSH_COPENSSL_SHIM_H
// Why this shim exists: the HMAC, RAND, SHA-1, base64 and CRYPTO_memcmp declarations Swift needs, in one header.
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#endif
