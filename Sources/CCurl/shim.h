#ifndef RIDEPUSH_CCURL_SHIM_H
#define RIDEPUSH_CCURL_SHIM_H
// Why this shim exists: curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic
// (macros over variadic functions when the compiler checks types), which Swift cannot call.
// Each wrapper below fixes one argument type, so Swift passes exactly what libcurl reads.
#include <curl/curl.h>

static inline CURLcode ccurl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }

// CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION share this shape.
typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *user);
static inline CURLcode ccurl_easy_setopt_data_callback(CURL *h, CURLoption o, ccurl_data_callback f) { return curl_easy_setopt(h, o, f); }

static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

static inline CURLcode ccurl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }

// CURLMsg's result sits in a union Swift imports awkwardly; read it here.
static inline CURLcode ccurl_msg_result(const CURLMsg *msg) { return msg->data.result; }

#endif
