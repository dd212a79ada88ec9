// The system's libcrypto (OpenSSL 3: Debian's libssl-dev to build, libssl3 at run time), for
// SHA-256 through its EVP digest functions (ProxyBundleDelivery's SHA256.swift).
#ifndef PROXYBUNDLE_CCRYPTO_H
#define PROXYBUNDLE_CCRYPTO_H

#include <openssl/err.h>
#include <openssl/evp.h>

#endif
