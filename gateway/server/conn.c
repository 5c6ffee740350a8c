/*
 * conn.c - connection I/O and framing: output queues and flushes,
 * sequenced sends into a key's stream and its retransmission ring,
 * retransmission pumping, reading and frame splitting, and admission before
 * login (per-address counts, refusals, accepting). Loop thread.
 *
 * On a TLS listener (tls.c) the same queues hold plaintext: reads go
 * through the connection's SSL into the frame buffer (tls_input), flushes
 * encrypt the output queue a record at a time into the cipher buffer and
 * write that (tls_flush). The handshake is part of the time before login:
 * the connection is counted, and timed out, as awaiting login from accept;
 * nothing is sent to it before the handshake completes, so a refusal or a
 * login timeout then closes it bare.
 */
#include "gateway_int.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

/* ------------------------------------------------------------- connections */

static void conn_flush(conn_t *c);

/* Bytes not yet written: both output buffers and, with TLS, the
 * ciphertext in flight and not yet taken from the write BIO. */
static size_t conn_queued(const conn_t *c) {
  size_t n = c->out_len[0] + c->out_len[1];
  if (c->ssl != NULL) n += c->cb_len + BIO_ctrl_pending(c->wbio);
  return n;
}

static void mark_dirty(conn_t *c) {
  if (c->dirty) return;
  c->dirty = 1;
  c->dirty_next = c->gw->dirty_head;
  c->gw->dirty_head = c->idx;
}

void gw_flush_dirty(hg_gateway_t *gw) {
  hg_outlog_flush(gw->outlog); /* first: a frame on the wire is in the journal */
  while (gw->dirty_head != NONE32) {
    conn_t *c = &gw->conns[gw->dirty_head];
    gw->dirty_head = c->dirty_next;
    c->dirty = 0;
    if (c->used) conn_flush(c);
  }
}

/* Queues raw frame bytes. Past the hard cap the session ends (slow
 * consumer); above the high-water mark reading pauses until it drains. */
bool gw_conn_send_raw(conn_t *c, const uint8_t *bytes, size_t len) {
  hg_gateway_t *gw = c->gw;
  if (!c->used || c->closing) return false;
  if (c->ssl != NULL && !c->hs_done) return false; /* no channel yet (see the top) */
  if (conn_queued(c) + len > gw->cfg.out_hard_cap) {
    gw_log(gw, HG_LOG_WARN, "connection %u: slow consumer, outbound queue at %zu bytes",
           c->idx, conn_queued(c));
    STAT_ADD(gw, st_terminations);
    gw_conn_close(c);
    return false;
  }
  memcpy(c->out[c->fill] + c->out_len[c->fill], bytes, len);
  c->out_len[c->fill] += len;
  STAT_ADD(gw, st_frames_out);
  hg_sess_sent(&c->sess, gw_clock(gw));
  mark_dirty(c);
  if (c->reading && conn_queued(c) > gw->cfg.out_high_water) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  return true;
}

/* Encodes env into the scratch buffer; returns its length or 0. */
size_t gw_encode(hg_gateway_t *gw, const env_t *env) {
  size_t len = 0;
  int rc = hg_wire_encode(env, gw->scratch, SCRATCH_SIZE, &len);
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "cannot encode a message (body %d): %s", (int)env->body_case,
           hg_strerror(rc));
    return 0;
  }
  return len;
}

/* Unsequenced message to one connection (session messages, market data). */
void gw_conn_send(conn_t *c, const env_t *env) {
  if (!c->used || c->closing) return;
  size_t n = gw_encode(c->gw, env);
  if (n > 0) gw_conn_send_raw(c, c->gw->scratch, n);
}

/* Ends the session with a Terminate, then closes once it is written. */
void gw_conn_terminate(conn_t *c, uint32_t code, const char *text) {
  if (!c->used || c->closing) return;
  Hourglass__V1__Terminate t = HOURGLASS__V1__TERMINATE__INIT;
  t.code = code;
  t.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(TERMINATE);
  env.terminate = &t;
  gw_conn_send(c, &env);
  if (code != TERM(LOGOUT)) STAT_ADD(c->gw, st_terminations);
  if (!c->used) return; /* the send itself closed it */
  gw_conn_end(c);
}

/* TLS: once a closing connection's last frame is encrypted, queues the
 * close_notify behind it (so the peer can tell an end from a cut). */
static void tls_close_notify(conn_t *c) {
  if (!c->closing || !c->hs_done || c->tls_shut || c->out_len[0] != 0) return;
  c->tls_shut = 1;
  (void)SSL_shutdown(c->ssl);
  ERR_clear_error();
}

void gw_conn_end(conn_t *c) {
  c->closing = 1;
  c->closing_since = now_mono();
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  if (c->ssl != NULL) {
    tls_close_notify(c);
    mark_dirty(c);
  }
  if (conn_queued(c) == 0) gw_conn_close(c);
}

/* ----------------------------------------------------------------- streams */

stream_t *gw_conn_stream(conn_t *c) {
  return c->stream == NONE32 ? NULL : &c->gw->streams[c->stream];
}

static conn_t *conn_at(hg_gateway_t *gw, uint32_t idx1) {
  return idx1 == 0 ? NULL : &gw->conns[idx1 - 1];
}

bool gw_stream_gen_live(hg_gateway_t *gw, const stream_t *st, uint32_t gen) {
  for (conn_t *c = conn_at(gw, st->conn); c != NULL; c = conn_at(gw, c->stream_next))
    if (c->gen == gen) return c->used && !c->closing;
  return false;
}

void gw_stream_attach(hg_gateway_t *gw, stream_t *st, conn_t *c) {
  (void)gw;
  c->stream_next = st->conn;
  st->conn = c->idx + 1;
  st->n_conns++;
}

void gw_stream_detach(hg_gateway_t *gw, stream_t *st, conn_t *c) {
  uint32_t *link = &st->conn;
  while (*link != 0 && *link != c->idx + 1) link = &gw->conns[*link - 1].stream_next;
  if (*link == 0) return;
  *link = c->stream_next;
  c->stream_next = 0;
  assert(st->n_conns > 0);
  st->n_conns--;
}

/* Appends a frame to the stream's retransmission log, evicting the oldest
 * frames until it fits. */
static void log_append(hg_gateway_t *gw, stream_t *st, const uint8_t *f, size_t len) {
  uint64_t cap = gw->cfg.retransmit_bytes;
  uint32_t ecap = gw->cfg.retransmit_frames;
  if (len > cap) { /* cannot be kept: the log restarts after it */
    st->n_ent = 0;
    st->first_seq = st->next_seq;
    return;
  }
  while (st->n_ent > 0) {
    logent_t *old = &st->ent[st->first_seq % ecap];
    if (st->n_ent < ecap && st->log_head + len - old->pos <= cap) break;
    st->first_seq++;
    st->n_ent--;
  }
  if (st->n_ent == 0) st->first_seq = st->next_seq - 1;
  uint64_t at = st->log_head % cap;
  size_t first = len < cap - at ? len : (size_t)(cap - at);
  memcpy(st->log + at, f, first);
  memcpy(st->log, f + first, len - first);
  logent_t *e = &st->ent[(st->next_seq - 1) % ecap];
  e->pos = st->log_head;
  e->len = (uint32_t)len;
  st->log_head += len;
  st->n_ent++;
  /* The ring holds exactly the frames [first_seq, next_seq). */
  assert(st->n_ent <= ecap && st->first_seq + st->n_ent == st->next_seq);
}

/* Sequenced message to a key's stream: logged for retransmission and sent
 * to each of the key's connections. */
void gw_stream_send(hg_gateway_t *gw, stream_t *st, env_t *env) {
  if (gw_hold_applies(gw, st)) {
    env->has_seq = 0;
    size_t n = gw_encode(gw, env);
    if (n > 0) gw_hold_frame(gw, st, gw->scratch, n);
    return;
  }
  if (gw_relogged(gw, st)) return;
  PB_SET(*env, seq, st->next_seq++);
  size_t n = gw_encode(gw, env);
  if (n == 0) { /* logged; neither sent nor kept, so its seq is not used */
    st->next_seq--;
    return;
  }
  gw_stream_emit(gw, st, env->seq, n);
}

bool gw_relogged(hg_gateway_t *gw, const stream_t *st) {
  if (!hg_outlog_logged(gw->outlog, st->key_id)) return false;
  if (gw->relogged++ == 0)
    gw_log(gw, HG_LOG_INFO, "restart: results of log entries applied before the restart are "
           "applied again; their frames are in the outbound log already and keep their seqs");
  return true;
}

void gw_stream_emit(hg_gateway_t *gw, stream_t *st, uint64_t seq, size_t n) {
  log_append(gw, st, gw->scratch, n);
  hg_outlog_append(gw->outlog, st->key_id, seq, gw->scratch, (uint32_t)n);
  /* A send may close a slow consumer, which unlinks it: take next first. */
  for (conn_t *c = conn_at(gw, st->conn), *next; c != NULL; c = next) {
    next = conn_at(gw, c->stream_next);
    gw_conn_send_raw(c, gw->scratch, n);
  }
}

void gw_stream_send_idx(hg_gateway_t *gw, uint32_t s, env_t *env) {
  if (s != NONE32 && s < gw->cfg.max_streams && gw->streams[s].key_id != 0)
    gw_stream_send(gw, &gw->streams[s], env);
}

/* Reads frame rt_next from the journal into the connection. 1: done, 0:
 * no room yet, -1: cannot be read (logged). */
static int rt_from_file(conn_t *c, stream_t *st) {
  hg_gateway_t *gw = c->gw;
  size_t len = 0;
  size_t room = gw->cfg.out_hard_cap - conn_queued(c);
  int rc = hg_outlog_read(gw->outlog, st->key_id, c->rt_next, c->out[c->fill] + c->out_len[c->fill],
                          room, &len);
  if (rc == -ENOBUFS) return 0;
  if (rc != 0) {
    gw_log(gw, HG_LOG_WARN, "retransmission from the outbound journal ended: %s",
           hg_strerror(rc));
    return -1;
  }
  c->out_len[c->fill] += len;
  STAT_ADD(gw, st_frames_out);
  mark_dirty(c);
  c->rt_next++;
  return 1;
}

/* Copies log frames [rt_next, rt_end) into the connection while it has room
 * below the high-water mark; the rest follows as writes complete. */
void gw_rt_pump(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  stream_t *st = gw_conn_stream(c);
  if (st == NULL || !c->sess.retransmitting) return;
  uint64_t cap = gw->cfg.retransmit_bytes;
  while (c->rt_next < c->rt_end && c->used && !c->closing &&
         conn_queued(c) < gw->cfg.out_high_water / 2) {
    if (c->rt_next < st->first_seq) { /* older than the ring: from the journal */
      int r = rt_from_file(c, st);
      if (r > 0) continue;
      if (r < 0) c->rt_next = c->rt_end; /* lost meanwhile: the client asks again */
      break;
    }
    logent_t *e = &st->ent[c->rt_next % gw->cfg.retransmit_frames];
    if (conn_queued(c) + e->len > gw->cfg.out_hard_cap) break;
    uint64_t at = e->pos % cap;
    size_t first = e->len < cap - at ? e->len : (size_t)(cap - at);
    uint8_t *dst = c->out[c->fill] + c->out_len[c->fill];
    memcpy(dst, st->log + at, first);
    memcpy(dst + first, st->log, e->len - first);
    c->out_len[c->fill] += e->len;
    STAT_ADD(gw, st_frames_out);
    mark_dirty(c);
    c->rt_next++;
  }
  if (c->rt_next >= c->rt_end) c->sess.retransmitting = 0;
}

/* ------------------------------------------------------------ conn I/O */

static void on_write(uv_write_t *req, int status);
static void process_input(conn_t *c);
static void conn_input(conn_t *c);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void tls_flush(conn_t *c);

/* One write per connection per loop iteration (flush_dirty). The common case
 * goes straight to the socket with uv_try_write: a uv_write that completes at
 * once still costs a deferred callback and, in libuv, an epoll_ctl to drop
 * the POLLOUT interest it never needed - a syscall per flush. Only what the
 * socket does not take, and connections whose write completion drives more
 * (closing, retransmitting, reading paused), take the uv_write path. */
static void conn_flush(conn_t *c) {
  if (c->ssl != NULL) {
    tls_flush(c);
    return;
  }
  if (c->writing || c->out_len[c->fill] == 0) return;
  int w = c->fill;
  uv_buf_t b = uv_buf_init((char *)c->out[w], (unsigned)c->out_len[w]);
  if (c->reading && !c->closing && !c->sess.retransmitting) {
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)b.len) {
      c->out_len[w] = 0;
      return;
    }
    if (n < 0 && n != UV_EAGAIN) {
      c->out_len[w] = 0;
      gw_conn_close(c);
      return;
    }
    if (n > 0) b = uv_buf_init(b.base + n, b.len - (unsigned)n);
  }
  c->fill ^= 1;
  int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write);
  if (rc != 0) {
    c->out_len[w] = 0;
    gw_conn_close(c);
    return;
  }
  c->writing = 1;
}

static void on_write(uv_write_t *req, int status) {
  conn_t *c = req->data;
  hg_gateway_t *gw = c->gw;
  c->writing = 0;
  if (c->ssl != NULL) {
    c->cb_len = 0;
  } else {
    c->out_len[c->fill ^ 1] = 0;
  }
  if (!c->used) return;
  if (status < 0) {
    gw_conn_close(c);
    return;
  }
  if (c->closing) {
    if (conn_queued(c) == 0) {
      gw_conn_close(c);
    } else {
      conn_flush(c);
    }
    return;
  }
  gw_rt_pump(c);
  conn_flush(c);
  if (!c->reading && !c->closing && conn_queued(c) <= gw->cfg.out_high_water / 2) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) {
      c->reading = 1;
      conn_input(c);
      gw_flush_dirty(gw);
    }
  }
}

static void admit(hg_gateway_t *gw);

static void on_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  hg_gateway_t *gw = c->gw;
  if (c->ssl != NULL) gw_tls_free(c);
  c->used = 0;
  c->dirty_next = gw->free_conn;
  gw->free_conn = c->idx;
  if (gw->accept_waiting) admit(gw);
}

/* ------------------------------------------------- admission before login */

static uint32_t peer_home(const hg_gateway_t *gw, const uint8_t a[16]) {
  uint64_t hi, lo;
  memcpy(&hi, a, 8);
  memcpy(&lo, a + 8, 8);
  return (uint32_t)hg_mix64(hi ^ hg_mix64(lo)) & gw->peers_mask;
}

/* The entry of address a, or with add a free slot holding a (count 0: the
 * caller counts). NULL if absent, or with add if the table is full (never,
 * at the size create gives it: each entry is a counted connection and
 * there are twice as many slots as max_unauthenticated). */
static peer_count_t *peer_find(hg_gateway_t *gw, const uint8_t a[16], bool add) {
  uint32_t i = peer_home(gw, a);
  for (uint32_t k = 0; k <= gw->peers_mask; k++, i = (i + 1) & gw->peers_mask) {
    peer_count_t *e = &gw->peers[i];
    if (e->n == 0) {
      if (!add) return NULL;
      memcpy(e->addr, a, 16);
      return e;
    }
    if (memcmp(e->addr, a, 16) == 0) return e;
  }
  return NULL;
}

/* One connection of e's address fewer; the last one frees the slot (linear
 * probing delete with backward shift, as map_del). */
static void peer_drop(hg_gateway_t *gw, peer_count_t *e) {
  if (--e->n != 0) return;
  uint32_t m = gw->peers_mask;
  uint32_t i = (uint32_t)(e - gw->peers);
  for (;;) {
    uint32_t j = i;
    for (;;) {
      j = (j + 1) & m;
      if (gw->peers[j].n == 0) return;
      uint32_t home = peer_home(gw, gw->peers[j].addr);
      bool stay = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stay) break;
    }
    gw->peers[i] = gw->peers[j];
    gw->peers[j].n = 0;
    i = j;
  }
}

/* The peer's address in IPv6 form (IPv4 as ::ffff:a.b.c.d). 0 or a libuv
 * error (the peer is already gone). */
static int peer_addr(uv_tcp_t *t, uint8_t out[16]) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  int rc = uv_tcp_getpeername(t, (struct sockaddr *)&ss, &len);
  if (rc != 0) return rc;
  memset(out, 0, 16);
  if (ss.ss_family == AF_INET) {
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &((const struct sockaddr_in *)&ss)->sin_addr, 4);
    return 0;
  }
  if (ss.ss_family == AF_INET6) {
    memcpy(out, &((const struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    return 0;
  }
  return UV_EINVAL;
}

/* The connection no longer awaits login (it logged in, or it closes). */
void gw_unauth_release(hg_gateway_t *gw, conn_t *c) {
  if (!c->unauth) return;
  c->unauth = 0;
  assert(gw->n_unauth > 0);
  gw->n_unauth--;
  peer_count_t *e = peer_find(gw, c->peer, false);
  if (e != NULL) peer_drop(gw, e);
}

/* Closes the socket; the slot is released in the close callback. Everything
 * the connection meant to the gateway (stream attachment, subscriptions,
 * cancel-on-disconnect) is undone here, at once. */
void gw_conn_close(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  if (!c->used || uv_is_closing((uv_handle_t *)&c->tcp)) return;
  c->closing = 1;
  if (c->logged_in) {
    gw_release_stream_side(c);
    assert(gw->n_sessions > 0);
    gw->n_sessions--;
  } else {
    gw_unauth_release(gw, c);
  }
  STAT_SET(gw, st_sessions, gw->n_sessions);
  STAT_SET(gw, st_unauth, gw->n_unauth);
  c->logged_in = 0;
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn_t *c = h->data;
  if (c->ssl != NULL) {
    *buf = uv_buf_init((char *)c->gw->tls_in, TLS_IN_SIZE);
    return;
  }
  size_t cap = c->gw->cfg.max_frame + 16;
  *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(cap - c->in_len));
}

static void process_input(conn_t *c);

/* Handles every complete frame buffered (reading may pause in between). */
static void process_input(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  size_t off = 0;
  while (c->used && !c->closing && c->reading) {
    hg_wire_frame_t f;
    int rc = hg_wire_frame_parse(c->in + off, c->in_len - off, gw->cfg.max_frame, &f);
    if (rc == -EAGAIN) break;
    if (rc != 0) {
      gw_conn_terminate(c, hg_wire_frame_error_code(rc), "bad frame header");
      break;
    }
    if (c->in_len - off < (size_t)f.hdr_len + f.body_len) break;
    STAT_ADD(gw, st_frames_in);
    gw_handle_frame(c, c->in + off + f.hdr_len, f.body_len);
    off += f.hdr_len + f.body_len;
  }
  if (c->used && off > 0) {
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
  }
}

/* ------------------------------------------------------------------- TLS */

/* The connection's TLS failed (a bad handshake, a bad record): the alert
 * OpenSSL queued goes out if the socket takes it at once, then the
 * connection closes. Other connections are not affected. */
static void tls_fail(conn_t *c, const char *what) {
  hg_gateway_t *gw = c->gw;
  char err[160];
  unsigned long e = ERR_peek_error();
  if (e != 0) {
    ERR_error_string_n(e, err, sizeof err);
  } else {
    snprintf(err, sizeof err, "connection closed");
  }
  ERR_clear_error();
  /* One line a second at most: anyone can connect and fail. */
  uint64_t now = now_mono();
  if (now - gw->tls_log_ns >= 1000000000ull) {
    gw_log(gw, HG_LOG_INFO, "connection %u: TLS %s failed: %s (%u more since the last line)",
           c->idx, what, err, gw->tls_log_quiet);
    gw->tls_log_ns = now;
    gw->tls_log_quiet = 0;
  } else {
    gw->tls_log_quiet++;
  }
  STAT_ADD(gw, st_tls_failures);
  if (!c->writing && c->cb_len == 0) {
    int n = BIO_read(c->wbio, c->cbuf, TLS_CBUF_SIZE);
    if (n > 0) {
      uv_buf_t b = uv_buf_init((char *)c->cbuf, (unsigned)n);
      (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    }
  }
  gw_conn_close(c);
}

/* Encrypts queued plaintext a record at a time while the write BIO holds
 * less than a cipher buffer, and writes the ciphertext by the same rules
 * as conn_flush (uv_try_write when nothing waits on the completion). */
static void tls_flush(conn_t *c) {
  while (c->used && !c->writing && !uv_is_closing((uv_handle_t *)&c->tcp)) {
    if (c->hs_done && c->out_len[0] > 0) {
      size_t done = 0;
      while (done < c->out_len[0] && BIO_ctrl_pending(c->wbio) < TLS_CBUF_SIZE) {
        size_t n = c->out_len[0] - done, w = 0;
        if (n > TLS_RECORD) n = TLS_RECORD;
        if (SSL_write_ex(c->ssl, c->out[0] + done, n, &w) != 1) {
          tls_fail(c, "write");
          return;
        }
        done += w;
      }
      memmove(c->out[0], c->out[0] + done, c->out_len[0] - done);
      c->out_len[0] -= done;
    }
    tls_close_notify(c);
    int n = BIO_read(c->wbio, c->cbuf, TLS_CBUF_SIZE);
    if (n <= 0) return;
    uv_buf_t b = uv_buf_init((char *)c->cbuf, (unsigned)n);
    if (c->reading && !c->closing && !c->sess.retransmitting) {
      int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
      if (w == n) continue;
      if (w < 0 && w != UV_EAGAIN) {
        gw_conn_close(c);
        return;
      }
      if (w > 0) b = uv_buf_init(b.base + w, b.len - (unsigned)w);
    }
    c->cb_len = b.len;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
      c->cb_len = 0;
      gw_conn_close(c);
      return;
    }
    c->writing = 1;
  }
}

/* Runs the handshake until it completes, then decrypts into the frame
 * buffer and handles the frames, while reading is on (plaintext left in
 * the SSL when reading pauses is taken when it resumes). Whatever OpenSSL
 * wants to send (handshake, tickets, alerts) goes out with the next flush. */
static void tls_input(conn_t *c) {
  if (!c->hs_done) {
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r != 1) {
      if (SSL_get_error(c->ssl, r) != SSL_ERROR_WANT_READ) {
        tls_fail(c, "handshake");
        return;
      }
      if (BIO_ctrl_pending(c->wbio) > 0) mark_dirty(c);
      return;
    }
    c->hs_done = 1;
  }
  size_t cap = c->gw->cfg.max_frame + 16;
  while (c->used && !c->closing && c->reading && c->in_len < cap) {
    size_t got = 0;
    ERR_clear_error();
    int r = SSL_read_ex(c->ssl, c->in + c->in_len, cap - c->in_len, &got);
    if (r != 1) {
      int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ) break;
      if (e == SSL_ERROR_ZERO_RETURN) { /* the peer's close_notify */
        gw_conn_close(c);
        return;
      }
      tls_fail(c, "read");
      return;
    }
    c->in_len += got;
    process_input(c);
  }
  if (c->used && BIO_ctrl_pending(c->wbio) > 0) mark_dirty(c);
}

/* Handles what has arrived: buffered frames, and with TLS what the SSL
 * holds decrypted or undecrypted. */
static void conn_input(conn_t *c) {
  if (c->ssl != NULL) {
    tls_input(c);
  } else {
    process_input(c);
  }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  conn_t *c = s->data;
  hg_gateway_t *gw = c->gw;
  if (nread < 0) {
    gw_conn_close(c);
  } else if (c->ssl != NULL && nread > 0 && BIO_write(c->rbio, gw->tls_in, (int)nread) != (int)nread) {
    tls_fail(c, "buffering");
  } else {
    if (c->ssl == NULL) c->in_len += (size_t)nread;
    gw->in_read = 1;
    int outer = gw_clock_hold(gw);
    conn_input(c);
    gw_clock_release(gw, outer);
    gw->in_read = 0;
    if (gw->kick_due) {
      gw->kick_due = 0;
      hg_pipeline_kick(gw->pipe);
    }
  }
  gw_flush_dirty(gw);
}

const char *gw_refusal_text(uint32_t code) {
  return code == TERM(ADDRESS_LIMIT) ? "too many connections awaiting login from this address"
                                     : "too many connections awaiting login";
}

static void on_refusal_closed(uv_handle_t *h) {
  refusal_t *r = h->data;
  hg_gateway_t *gw = r->gw;
  r->next = gw->free_refusal;
  gw->free_refusal = (uint32_t)(r - gw->refusals);
  if (gw->accept_waiting) admit(gw);
}

/* Over the global limit: accept through a refusal handle, write the
 * TERM_SERVER_BUSY frame encoded at create (a fresh socket's empty send
 * buffer takes it whole; if it did not, the close is bare) and close. */
static void refuse_busy(hg_gateway_t *gw) {
  refusal_t *r = &gw->refusals[gw->free_refusal];
  gw->free_refusal = r->next;
  uv_tcp_init(&gw->loop, &r->tcp);
  r->tcp.data = r;
  if (uv_accept((uv_stream_t *)&gw->listener, (uv_stream_t *)&r->tcp) == 0) {
    STAT_ADD(gw, st_connections);
    STAT_ADD(gw, st_refused);
    if (gw->tls == NULL) { /* a TLS client could not read it: closed bare */
      uv_buf_t b = uv_buf_init((char *)gw->busy_frame, (unsigned)gw->busy_len);
      (void)uv_try_write((uv_stream_t *)&r->tcp, &b, 1);
    }
  }
  uv_close((uv_handle_t *)&r->tcp, on_refusal_closed);
}

/* Takes the connection the listener holds (see "Admission" in
 * hourglass/gateway.h). Without what it needs (a refusal handle over the
 * global limit, else a connection slot) it leaves the connection unaccepted,
 * which pauses libuv's accepting, and sets accept_waiting: the close that
 * frees one calls back here. A slot is then always on its way back: every
 * slot not held by a session or by a connection awaiting login (fewer than
 * max_sessions and max_unauthenticated) is closing. */
static void admit(hg_gateway_t *gw) {
  gw->accept_waiting = 0;
  if (uv_is_closing((uv_handle_t *)&gw->listener)) return;
  if (gw->n_unauth >= gw->cfg.max_unauthenticated) {
    if (gw->free_refusal == NONE32) {
      gw->accept_waiting = 1;
      return;
    }
    refuse_busy(gw);
    return;
  }
  if (gw->free_conn == NONE32) {
    gw->accept_waiting = 1;
    return;
  }
  conn_t *c = &gw->conns[gw->free_conn];
  gw->free_conn = c->dirty_next;
  uint32_t idx = c->idx;
  uint8_t *in = c->in, *o0 = c->out[0], *o1 = c->out[1], *cb = c->cbuf;
  memset(c, 0, sizeof *c);
  c->idx = idx;
  c->in = in;
  c->out[0] = o0;
  c->out[1] = o1;
  c->cbuf = cb;
  c->gw = gw;
  c->used = 1;
  c->gen = ++gw->gen_counter;
  c->stream = NONE32;
  c->dirty_next = NONE32;
  c->wreq.data = c;
  uv_tcp_init(&gw->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept((uv_stream_t *)&gw->listener, (uv_stream_t *)&c->tcp) != 0 ||
      peer_addr(&c->tcp, c->peer) != 0 || (gw->tls != NULL && gw_tls_accept(c) != 0)) {
    gw_conn_close(c);
    return;
  }
  STAT_ADD(gw, st_connections);
  uv_tcp_nodelay(&c->tcp, 1);
  if (gw->cfg.socket_sndbuf != 0) {
    int v = (int)gw->cfg.socket_sndbuf;
    uv_send_buffer_size((uv_handle_t *)&c->tcp, &v);
  }
  hg_sess_init(&c->sess, now_mono(), (uint64_t)gw->cfg.login_timeout_ms * 1000000u);
  peer_count_t *e = peer_find(gw, c->peer, true);
  if (e == NULL || e->n >= gw->cfg.max_unauthenticated_per_address) {
    /* Refused through its slot: it never counts as awaiting login. */
    uint32_t code = e == NULL ? TERM(SERVER_BUSY) : TERM(ADDRESS_LIMIT);
    STAT_ADD(gw, st_refused);
    gw_conn_terminate(c, code, gw_refusal_text(code));
    gw_flush_dirty(gw);
    return;
  }
  e->n++;
  c->unauth = 1;
  gw->n_unauth++;
  STAT_SET(gw, st_unauth, gw->n_unauth);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
    gw_conn_close(c);
    return;
  }
  c->reading = 1;
}

void gw_on_connection(uv_stream_t *server, int status) {
  if (status < 0) return;
  admit(server->data);
}
