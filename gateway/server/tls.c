/*
 * tls.c - the listener's TLS 1.3 context and each connection's TLS state.
 *
 * OpenSSL runs over memory BIOs: libuv reads ciphertext into gw->tls_in,
 * conn.c feeds it to the connection's read BIO and pulls plaintext with
 * SSL_read into the frame buffer; outbound plaintext goes through
 * SSL_write and the write BIO's ciphertext is copied into the connection's
 * cipher buffer for uv_try_write/uv_write. No socket is ever given to
 * OpenSSL, so the loop never blocks in it.
 *
 * The context is built at create on the owner thread and used read-only
 * (except for OpenSSL's own locked session state) by the loop thread.
 * Resumption: stateless TLS 1.3 tickets (two per full handshake), keyed by
 * OpenSSL's per-context ticket key, which lives as long as the gateway; a
 * restart makes old tickets fall back to a full handshake.
 */
#include "gateway_int.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

/* The session id context: required for resumption when clients present
 * certificates; any constant unique to this service. */
static const unsigned char SID_CTX[] = "hourglass.v1";

/* Logs OpenSSL's error queue (file names and reasons, never key bytes). */
static void log_ssl_errors(hg_gateway_t *gw, const char *what, const char *path) {
  unsigned long e = ERR_get_error();
  char buf[256];
  if (e == 0) snprintf(buf, sizeof buf, "unknown error");
  else ERR_error_string_n(e, buf, sizeof buf);
  gw_log(gw, HG_LOG_ERROR, "TLS: %s %s: %s", what, path != NULL ? path : "", buf);
  ERR_clear_error();
}

int gw_tls_create(hg_gateway_t *gw, const hg_gateway_config_t *cfg) {
  if (cfg->tls_cert == NULL && cfg->tls_key == NULL && cfg->tls_client_ca == NULL) return 0;
  if (cfg->tls_cert == NULL || cfg->tls_key == NULL) {
    gw_log(gw, HG_LOG_ERROR, "TLS: a certificate needs its key and a key its certificate");
    return HG_EINVAL;
  }
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL) {
    log_ssl_errors(gw, "cannot create a context", NULL);
    return -ENOMEM;
  }
  int rc = HG_EINVAL;
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
    log_ssl_errors(gw, "cannot require TLS 1.3", NULL);
  } else if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
    log_ssl_errors(gw, "cannot load the certificate", cfg->tls_cert);
  } else if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
    log_ssl_errors(gw, "cannot load the key", cfg->tls_key);
  } else if (SSL_CTX_check_private_key(ctx) != 1) {
    log_ssl_errors(gw, "the key does not match the certificate", cfg->tls_key);
  } else {
    rc = 0;
  }
  if (rc == 0 && cfg->tls_client_ca != NULL) {
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_client_ca);
    if (names == NULL || SSL_CTX_load_verify_locations(ctx, cfg->tls_client_ca, NULL) != 1) {
      log_ssl_errors(gw, "cannot load the client CA", cfg->tls_client_ca);
      sk_X509_NAME_pop_free(names, X509_NAME_free);
      rc = HG_EINVAL;
    } else {
      SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
  }
  if (rc == 0) {
    SSL_CTX_set_session_id_context(ctx, SID_CTX, sizeof SID_CTX - 1);
    SSL_CTX_set_num_tickets(ctx, 2);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    gw->tls_in = malloc(TLS_IN_SIZE);
    if (gw->tls_in == NULL) rc = -ENOMEM;
  }
  if (rc != 0) {
    SSL_CTX_free(ctx);
    return rc;
  }
  gw->tls = ctx;
  return 0;
}

void gw_tls_destroy(hg_gateway_t *gw) {
  SSL_CTX_free(gw->tls);
  gw->tls = NULL;
  free(gw->tls_in);
  gw->tls_in = NULL;
}

int gw_tls_accept(conn_t *c) {
  SSL *ssl = SSL_new(c->gw->tls);
  BIO *rb = BIO_new(BIO_s_mem());
  BIO *wb = BIO_new(BIO_s_mem());
  if (ssl == NULL || rb == NULL || wb == NULL) {
    SSL_free(ssl);
    BIO_free(rb);
    BIO_free(wb);
    ERR_clear_error();
    return -ENOMEM;
  }
  /* An empty memory BIO reads as "retry later", not end of file. */
  BIO_set_mem_eof_return(rb, -1);
  BIO_set_mem_eof_return(wb, -1);
  SSL_set_bio(ssl, rb, wb); /* ssl owns both */
  SSL_set_accept_state(ssl);
  c->ssl = ssl;
  c->rbio = rb;
  c->wbio = wb;
  c->hs_done = 0;
  c->cb_len = 0;
  return 0;
}

void gw_tls_free(conn_t *c) {
  SSL_free(c->ssl); /* frees the BIOs; OpenSSL wipes the keys it held */
  c->ssl = NULL;
  c->rbio = c->wbio = NULL;
}
