#ifndef RIDEPUSH_COPENSSL_SHIM_H
#define RIDEPUSH_COPENSSL_SHIM_H
// Why this shim exists: the HMAC, RAND, SHA-1, base64 and CRYPTO_memcmp declarations Swift needs, in one header.
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
// The identity provider's public keys (RideAuth's PublicKey): JWK members to EVP_PKEY through
// OSSL_PARAM_BLD, PEM SubjectPublicKeyInfo, ECDSA signatures re-encoded as DER.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

// X509_verify_cert_error_string and X509_V_ERR_*: the webhook outbox's words for a certificate
// libcurl refused (RideWebhooks/HTTPPost.swift).
#include <openssl/x509_vfy.h>

// EVP_PKEY_PUBLIC_KEY is an OR of two macros, which Swift does not import.
static inline int ridepush_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

#endif
