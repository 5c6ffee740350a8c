/*
 * targets.c - the servers the load generator drives (targets.h): the real
 * gateway set up through the client harness, and the three floor servers.
 *
 * The echo and commit floors are one libuv loop on its own thread; the
 * epoll floor is the same connections and replies under a bare epoll loop
 * (only [0, len) of its send buffer is used: everything is ready at once).
 * Each connection has a receive buffer (frames are parsed in place and
 * decoded into the server's one arena) and a send buffer of encoded
 * replies. In the libuv floors it is split in three by offsets: [0, ready)
 * may be written now, [ready, commit) waits for the commit in flight,
 * [commit, len) for the next one. Echo makes everything ready at the end
 * of each read. Group commit moves `commit` to `len` for every connection
 * when it submits a batch, and `ready` to `commit` when that batch's
 * fdatasync completes. At most one uv_write per connection is in flight,
 * over [0, ready) as it was when issued; bytes are only appended behind it
 * and moved down once it completes.
 */
#include "targets.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <uv.h>

#include "client_util.h"
#include "hourglass/wire.h"
#include "tls_certs.h"

/* ------------------------------------------------------- the real gateway */

struct tg_gateway {
  ts_server_t s;
  char tls_dir[256]; /* "": plain */
  uint32_t mark_ms;  /* 0: no marker thread */
  pthread_t marker;
  atomic_bool stop_marker;
  _Atomic uint64_t marks; /* MARK commands queued */
};

/* The origin of the marker's MARK commands: hourglassd's mark timer's
 * (daemon/serve.c); no one waits for their results. */
#define TG_MARK_ORIGIN (UINT64_C(0x4d) << 56)

/* The marker thread: hourglassd's mark timer (daemon/serve.c mark_tick),
 * on its own thread since the bench has no daemon main loop: every
 * mark_ms, a MARK command through the pipeline's normal command path when
 * commands were sequenced since the last one. Wakes every 20 ms at most to
 * see whether it should stop. */
static void *marker_main(void *arg) {
  tg_gateway_t *g = arg;
  pthread_setname_np(pthread_self(), "bench-marker");
  uint64_t seen_seq = 0;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (!atomic_load(&g->stop_marker)) {
    next.tv_nsec += (long)(g->mark_ms % 1000u) * 1000000L;
    next.tv_sec += g->mark_ms / 1000u + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    for (;;) {
      struct timespec now, step = {0, 20000000L};
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (atomic_load(&g->stop_marker)) return NULL;
      int64_t left = (int64_t)(next.tv_sec - now.tv_sec) * 1000000000LL +
                     (next.tv_nsec - now.tv_nsec);
      if (left <= 0) break;
      if (left < step.tv_nsec) step.tv_nsec = (long)left;
      nanosleep(&step, NULL);
    }
    hg_pipeline_stats_t st;
    hg_pipeline_stats(g->s.p, &st);
    if (st.last_seq == seen_seq) continue;
    hg_command_t c;
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_MARK;
    /* busy: the next tick tries again, as the daemon's timer does */
    if (hg_pipeline_submit(g->s.p, TG_MARK_ORIGIN, &c) == 0) {
      seen_seq = st.last_seq + 1;
      atomic_fetch_add(&g->marks, 1);
    }
  }
  return NULL;
}

/* The certificate files of the TLS gateway (ts_server_options_t.tweak
 * takes no context; one TLS gateway at a time). */
static char tls_cert[320], tls_key[320], tls_ca[320];

static void tls_tweak(hg_gateway_config_t *cfg) {
  cfg->tls_cert = tls_cert;
  cfg->tls_key = tls_key;
}

tg_gateway_t *tg_gateway_up(const tg_gateway_opts_t *o, lg_fleet_t *f) {
  tg_gateway_t *g = calloc(1, sizeof *g);
  if (g == NULL) lg_die("server create", -ENOMEM);
  uint32_t n_sessions = o->sessions;
  ts_server_options_t co = {0};
  co.base_dir = o->dir;
  co.durable = 1;
  co.journal_direct = o->journal_direct;
  co.rt_priority = o->rt_priority;
  co.pipe_mode = (o->threads_mode ? HG_PIPE_MODE_THREADS : HG_PIPE_MODE_LOOP) + 1;
  co.max_sessions = n_sessions + 8;
  co.max_instruments = 4;
  co.max_accounts = n_sessions + 8;
  co.max_book_orders = 1u << 16;
  co.throttle_rate = 1000000;
  co.ring_capacity = 65536;
  co.segment_size = 256u << 20; /* no segment switch inside a run */
  if (o->tls) {
    snprintf(g->tls_dir, sizeof g->tls_dir, "%s/bench_tls.XXXXXX", o->dir);
    if (mkdtemp(g->tls_dir) == NULL) lg_die("TLS directory", -errno);
    if (ts_tls_make(g->tls_dir) != 0) lg_die("TLS certificates (openssl)", HG_EINVAL);
    snprintf(tls_cert, sizeof tls_cert, "%s/server.pem", g->tls_dir);
    snprintf(tls_key, sizeof tls_key, "%s/server.key", g->tls_dir);
    snprintf(tls_ca, sizeof tls_ca, "%s/ca.pem", g->tls_dir);
    co.tweak = tls_tweak;
    ch_use_tls(tls_ca);
  }
  int rc = ts_server_create(&g->s, &co);
  if (rc != 0) lg_die("server create", rc);
  if ((rc = ts_server_add_key(&g->s, TG_OP_KEY, HG_ROLE_OPERATOR, 0, 0)) != 0) lg_die("add key", rc);
  uint32_t *acc = calloc(n_sessions, sizeof *acc), *firm = calloc(n_sessions, sizeof *firm);
  if (acc == NULL || firm == NULL) lg_die("add key", -ENOMEM);
  for (uint32_t i = 0; i < n_sessions; i++) {
    acc[i] = i + 1;
    firm[i] = 1 + i % 16;
    rc = ts_server_add_key(&g->s, TG_KEY_BASE + i, HG_ROLE_TRADER, acc[i], firm[i]);
    if (rc != 0) lg_die("add key", rc);
  }
  if ((rc = ts_server_run(&g->s)) != 0) lg_die("server start", rc);
  if (ch_setup_market(&g->s, TG_OP_KEY, 1, acc, firm, n_sessions) != 0)
    lg_die("market setup", HG_EINVAL);
  ch_use_tls(NULL);
  free(acc);
  free(firm);

  rc = lg_fleet_login_tls(f, g->s.port, TG_KEY_BASE, n_sessions, ts_key_secret,
                          o->keepalive_ms ? o->keepalive_ms : 5000, o->tls ? tls_ca : NULL);
  if (rc != 0) lg_die("login", rc);
  /* Resting sells far above the IOC buys: a book with depth that never trades. */
  for (uint32_t i = 0; i < n_sessions && i < 8; i++) {
    for (int k = 0; k < 50; k++) {
      hg_client_order_t o2 = {.instrument_id = 1, .client_order_id = (uint64_t)1 << 40 | (uint64_t)k,
                              .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                              .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                              .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                              .price = 90000 + k * 10 + (int64_t)i, .qty = 5};
      uint64_t seq;
      hg_client_new_order(f->sess[i].c, &o2, &seq);
      f->sess[i].due[seq % LG_RING] = 0;
    }
    hg_client_flush(f->sess[i].c, 1000);
  }
  if (o->mark_ms != 0) {
    g->mark_ms = o->mark_ms;
    if ((rc = pthread_create(&g->marker, NULL, marker_main, g)) != 0) lg_die("marker thread", -rc);
  }
  return g;
}

uint64_t tg_gateway_marks(tg_gateway_t *g) { return atomic_load(&g->marks); }

void tg_gateway_down(tg_gateway_t *g, lg_fleet_t *f) {
  if (g->mark_ms != 0) {
    atomic_store(&g->stop_marker, true);
    pthread_join(g->marker, NULL);
  }
  lg_fleet_close(f);
  ts_server_stop(&g->s);
  if (g->tls_dir[0] != '\0') util_rm_rf(g->tls_dir);
  free(g);
}

/* ------------------------------------------------------ the floor servers */

#define FL_MAX_FRAME 8192u
#define FL_RX_CAP (64u * 1024u)  /* above one frame, so a partial frame always fits */
#define FL_TX_CAP (4u << 20)     /* held replies of one connection; seconds of them */
#define FL_MAX_CONNS 64u
#define FL_RECORD 64u
#define FL_MiB (1u << 20)

typedef struct fl_conn {
  uv_tcp_t tcp;
  struct tg_floor *srv;
  bool used;
  uint8_t rx[FL_RX_CAP];
  size_t rx_len;
  uint8_t *tx;          /* FL_TX_CAP bytes, owned by the connection */
  size_t tx_len;        /* encoded replies */
  size_t tx_commit;     /* [0, tx_commit): in the commit in flight or earlier */
  size_t tx_ready;      /* [0, tx_ready): may be written */
  size_t tx_inflight;   /* [0, tx_inflight): handed to the uv_write in flight */
  uv_write_t wr;
  uint64_t out_seq;     /* seq of the next stream frame */
  int fd;               /* TG_EPOLL: the socket (the uv handle is unused) */
  bool want_out;        /* TG_EPOLL: EPOLLOUT registered (a write fell short) */
} fl_conn_t;

/* One 64-byte record per order, as a journal would log it. */
typedef struct fl_record {
  uint64_t n, conn, ref_seq, client_order_id;
  int64_t price, qty;
  uint64_t ts, check;
} fl_record_t;
_Static_assert(sizeof(fl_record_t) == FL_RECORD, "a record is 64 bytes");

struct tg_floor {
  tg_floor_kind_t kind;
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop;
  uv_check_t check; /* TG_COMMIT: submits the batch at the end of each iteration */
  uv_poll_t poll;   /* TG_COMMIT: the eventfd of the ring */
  uv_thread_t thread;
  fl_conn_t *conns; /* FL_MAX_CONNS, owned */
  hg_wire_arena_t arena;
  uint8_t *arena_buf;
  uint64_t next_order_id;
  /* TG_EPOLL */
  int epfd, lfd, stop_fd;
  /* TG_COMMIT */
  struct io_uring ring;
  int efd, fd;
  uint64_t file_size, off;
  uint8_t *acc, *fly;   /* the accumulating batch and the one in flight */
  size_t acc_len, acc_cap, fly_len, fly_cap;
  struct iovec iov;
  int cqes_left;        /* of the commit in flight (0: none) */
  int commit_err;
  _Atomic uint64_t orders, commits, records;
};

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void conn_closed(uv_handle_t *h) {
  fl_conn_t *c = h->data;
  free(c->tx);
  c->tx = NULL;
  c->used = false;
}

static void conn_close(fl_conn_t *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* Drops the first n bytes of the send buffer (no uv_write in flight). */
static void tx_consume(fl_conn_t *c, size_t n) {
  memmove(c->tx, c->tx + n, c->tx_len - n);
  c->tx_len -= n;
  c->tx_commit -= n;
  c->tx_ready -= n;
}

static void conn_flush(fl_conn_t *c);

static void write_done(uv_write_t *w, int status) {
  fl_conn_t *c = w->data;
  if (status < 0) {
    conn_close(c);
    return;
  }
  size_t n = c->tx_inflight;
  c->tx_inflight = 0;
  tx_consume(c, n);
  conn_flush(c);
}

/* Writes [0, tx_ready): at once as far as the socket takes it, the rest
 * through one uv_write. */
static void conn_flush(fl_conn_t *c) {
  if (c->tx_inflight > 0 || c->tx_ready == 0 || uv_is_closing((uv_handle_t *)&c->tcp)) return;
  uv_buf_t b = uv_buf_init((char *)c->tx, (unsigned)c->tx_ready);
  int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  if (w < 0 && w != UV_EAGAIN) {
    conn_close(c);
    return;
  }
  if (w > 0) tx_consume(c, (size_t)w);
  if (c->tx_ready == 0) return;
  b = uv_buf_init((char *)c->tx, (unsigned)c->tx_ready);
  c->wr.data = c;
  if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, write_done) != 0) {
    conn_close(c);
    return;
  }
  c->tx_inflight = c->tx_ready;
}

static void send_env(fl_conn_t *c, const Hourglass__V1__Envelope *env) {
  size_t n = 0;
  int rc = hg_wire_encode(env, c->tx + c->tx_len, FL_TX_CAP - c->tx_len, &n);
  if (rc != 0) lg_die("floor server: reply buffer", rc);
  c->tx_len += n;
}

static void on_login(fl_conn_t *c, const Hourglass__V1__Login *lg) {
  Hourglass__V1__LoginAck a = HOURGLASS__V1__LOGIN_ACK__INIT;
  a.session_id = lg->session_id;
  a.role = HG_ROLE_TRADER;
  a.account = 1;
  a.firm = 1;
  a.keepalive_ms = lg->has_keepalive_ms ? lg->keepalive_ms : 1000;
  a.next_seq = 1;
  a.server_time_ns = wall_ns();
  a.has_epoch = 1;
  a.epoch = 1;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_LOGIN_ACK;
  env.login_ack = &a;
  c->out_seq = 1;
  send_env(c, &env);
  /* Before any order: nothing is held ahead of it. */
  c->tx_commit = c->tx_ready = c->tx_len;
}

static void on_order(fl_conn_t *c, uint64_t ref_seq, const Hourglass__V1__NewOrderRequest *o) {
  struct tg_floor *s = c->srv;
  uint64_t oid = ++s->next_order_id;
  Hourglass__V1__ExecutionReport er = HOURGLASS__V1__EXECUTION_REPORT__INIT;
  er.exec_type = HOURGLASS__V1__EXEC_TYPE__EXEC_NEW;
  er.instrument_id = o->instrument_id;
  er.has_order_id = er.has_client_order_id = er.has_side = er.has_price = 1;
  er.has_qty = er.has_leaves = er.has_engine_seq = er.has_ts = er.has_ref_seq = 1;
  er.order_id = oid;
  er.client_order_id = o->client_order_id;
  er.side = o->side;
  er.price = o->price;
  er.qty = o->qty;
  er.leaves = o->qty;
  er.engine_seq = oid;
  er.ts = wall_ns();
  er.ref_seq = ref_seq;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.has_seq = 1;
  env.seq = c->out_seq++;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT;
  env.execution_report = &er;
  send_env(c, &env);
  /* The real gateway follows with the IOC's cancel (no ref_seq): the floor
   * sends the same second frame, so both carry the same bytes per order. */
  er.exec_type = HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED;
  er.leaves = 0;
  er.has_ref_seq = 0;
  er.engine_seq = oid;
  env.seq = c->out_seq++;
  send_env(c, &env);
  atomic_fetch_add_explicit(&s->orders, 1, memory_order_relaxed); /* a counter */
  if (s->kind != TG_COMMIT) return;
  if (s->acc_len + FL_RECORD > s->acc_cap) {
    /* Only the accumulating batch grows: the kernel may be reading the other. */
    size_t cap = s->acc_cap * 2;
    uint8_t *p = realloc(s->acc, cap);
    if (p == NULL) lg_die("floor server: batch", -ENOMEM);
    s->acc = p;
    s->acc_cap = cap;
  }
  fl_record_t r = {.n = oid, .conn = (uint64_t)(c - s->conns), .ref_seq = ref_seq,
                   .client_order_id = o->client_order_id, .price = o->price, .qty = o->qty,
                   .ts = er.ts};
  r.check = r.n ^ r.ref_seq ^ r.client_order_id ^ r.ts;
  memcpy(s->acc + s->acc_len, &r, sizeof r);
  s->acc_len += FL_RECORD;
}

/* Hands the accumulated batch to the kernel: writev at the file offset
 * linked to fdatasync, one commit in flight. */
static void commit_submit(struct tg_floor *s) {
  uint8_t *p = s->fly;
  size_t cap = s->fly_cap;
  s->fly = s->acc;
  s->fly_cap = s->acc_cap;
  s->fly_len = s->acc_len;
  s->acc = p;
  s->acc_cap = cap;
  s->acc_len = 0;
  if (s->fly_len > s->file_size) lg_die("floor server: batch larger than the file", HG_ERANGE);
  if (s->off + s->fly_len > s->file_size) s->off = 0; /* wrap: the file is a ring */
  for (uint32_t i = 0; i < FL_MAX_CONNS; i++)
    if (s->conns[i].used) s->conns[i].tx_commit = s->conns[i].tx_len;
  s->iov.iov_base = s->fly;
  s->iov.iov_len = s->fly_len;
  struct io_uring_sqe *w = io_uring_get_sqe(&s->ring);
  struct io_uring_sqe *f = io_uring_get_sqe(&s->ring);
  if (w == NULL || f == NULL) lg_die("floor server: io_uring", -EBUSY);
  io_uring_prep_writev(w, s->fd, &s->iov, 1, s->off);
  io_uring_sqe_set_flags(w, IOSQE_IO_LINK);
  io_uring_sqe_set_data64(w, 1);
  io_uring_prep_fsync(f, s->fd, IORING_FSYNC_DATASYNC);
  io_uring_sqe_set_data64(f, 2);
  int rc = io_uring_submit(&s->ring);
  if (rc != 2) lg_die("floor server: io_uring_submit", rc < 0 ? rc : -EIO);
  s->cqes_left = 2;
}

/* End of a loop iteration: what arrived in it goes to disk unless a
 * commit is in flight (then it waits for that one to finish). */
static void on_check(uv_check_t *h) {
  struct tg_floor *s = h->data;
  if (s->cqes_left == 0 && s->acc_len > 0) commit_submit(s);
}

/* The ring's eventfd: reap completions; a finished commit releases the
 * replies it held and starts the next batch. */
static void on_ring(uv_poll_t *h, int status, int events) {
  (void)events;
  struct tg_floor *s = h->data;
  if (status < 0) lg_die("floor server: poll", status);
  uint64_t v;
  if (read(s->efd, &v, sizeof v) < 0 && errno != EAGAIN) lg_die("floor server: eventfd", -errno);
  struct io_uring_cqe *cqe;
  while (s->cqes_left > 0 && io_uring_peek_cqe(&s->ring, &cqe) == 0) {
    /* A short write stops the chain: the sync then ends with -ECANCELED. */
    if (io_uring_cqe_get_data64(cqe) == 1 && cqe->res != (int)s->fly_len && s->commit_err == 0)
      s->commit_err = cqe->res < 0 ? cqe->res : -EIO;
    if (io_uring_cqe_get_data64(cqe) == 2 && cqe->res < 0 && s->commit_err == 0)
      s->commit_err = cqe->res;
    io_uring_cqe_seen(&s->ring, cqe);
    s->cqes_left--;
  }
  if (s->cqes_left > 0) return;
  if (s->commit_err != 0) lg_die("floor server: writev + fdatasync", s->commit_err);
  if (s->fly_len == 0) return; /* nothing was in flight */
  s->off += s->fly_len;
  atomic_fetch_add_explicit(&s->commits, 1, memory_order_relaxed); /* counters */
  atomic_fetch_add_explicit(&s->records, s->fly_len / FL_RECORD, memory_order_relaxed);
  s->fly_len = 0;
  for (uint32_t i = 0; i < FL_MAX_CONNS; i++) {
    fl_conn_t *c = &s->conns[i];
    if (!c->used) continue;
    c->tx_ready = c->tx_commit;
    conn_flush(c);
  }
  if (s->acc_len > 0) commit_submit(s);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  fl_conn_t *c = h->data;
  *buf = uv_buf_init((char *)c->rx + c->rx_len, (unsigned)(FL_RX_CAP - c->rx_len));
}

/* Decodes every complete frame in c->rx and queues the replies; keeps a
 * partial frame. Returns 0, or -1 when the bytes are not the protocol. */
static int rx_frames(fl_conn_t *c) {
  struct tg_floor *s = c->srv;
  size_t off = 0;
  int bad = 0;
  for (;;) {
    hg_wire_frame_t f;
    int rc = hg_wire_frame_parse(c->rx + off, c->rx_len - off, FL_MAX_FRAME, &f);
    if (rc == -EAGAIN) break;
    if (rc < 0) {
      bad = -1;
      break;
    }
    size_t total = (size_t)f.hdr_len + f.body_len;
    if (c->rx_len - off < total) break;
    Hourglass__V1__Envelope *e = NULL;
    if (hg_wire_decode(&s->arena, c->rx + off + f.hdr_len, f.body_len, &e) != 0) {
      bad = -1;
      break;
    }
    off += total;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_LOGIN)
      on_login(c, e->login);
    else if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER)
      on_order(c, e->seq, e->new_order);
  }
  memmove(c->rx, c->rx + off, c->rx_len - off);
  c->rx_len -= off;
  return bad;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  fl_conn_t *c = st->data;
  struct tg_floor *s = c->srv;
  if (nread < 0) {
    conn_close(c);
    return;
  }
  c->rx_len += (size_t)nread;
  if (rx_frames(c) != 0) {
    conn_close(c);
    return;
  }
  if (s->kind == TG_ECHO) c->tx_commit = c->tx_ready = c->tx_len;
  conn_flush(c);
}

static void on_connection(uv_stream_t *l, int status) {
  struct tg_floor *s = l->data;
  if (status < 0) return;
  fl_conn_t *c = NULL;
  for (uint32_t i = 0; i < FL_MAX_CONNS && c == NULL; i++)
    if (!s->conns[i].used) c = &s->conns[i];
  if (c == NULL) lg_die("floor server: connections", HG_EFULL);
  memset(c, 0, sizeof *c);
  c->srv = s;
  c->tx = malloc(FL_TX_CAP);
  if (c->tx == NULL) lg_die("floor server: connection", -ENOMEM);
  c->used = true;
  uv_tcp_init(&s->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---------------------------------------------------- the bare epoll floor */

#define EP_LISTEN UINT32_MAX
#define EP_STOP (UINT32_MAX - 1)

static void ep_close(struct tg_floor *s, fl_conn_t *c) {
  epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  c->used = false;
}

static void ep_interest(struct tg_floor *s, fl_conn_t *c, bool out) {
  if (c->want_out == out) return;
  struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u),
                           .data.u32 = (uint32_t)(c - s->conns)};
  epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_out = out;
}

/* Writes what is queued; what the socket does not take waits for EPOLLOUT. */
static void ep_flush(struct tg_floor *s, fl_conn_t *c) {
  if (c->tx_len == 0) return;
  ssize_t w = write(c->fd, c->tx, c->tx_len);
  if (w < 0 && errno != EAGAIN) {
    ep_close(s, c);
    return;
  }
  if (w > 0) {
    memmove(c->tx, c->tx + w, c->tx_len - (size_t)w);
    c->tx_len -= (size_t)w;
  }
  ep_interest(s, c, c->tx_len > 0);
}

static void ep_accept(struct tg_floor *s) {
  for (;;) {
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    fl_conn_t *c = NULL;
    for (uint32_t i = 0; i < FL_MAX_CONNS && c == NULL; i++)
      if (!s->conns[i].used) c = &s->conns[i];
    if (c == NULL) lg_die("epoll floor: connections", HG_EFULL);
    uint8_t *tx = c->tx; /* kept across connections: no allocation after the first */
    memset(c, 0, sizeof *c);
    c->srv = s;
    c->tx = tx != NULL ? tx : malloc(FL_TX_CAP);
    if (c->tx == NULL) lg_die("epoll floor: connection", -ENOMEM);
    c->fd = fd;
    c->used = true;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(c - s->conns)};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) lg_die("epoll floor: epoll_ctl", -errno);
  }
}

/* One read per readiness (level-triggered: what is left comes back at
 * once), every complete frame answered, one write for all the replies. */
static void ep_input(struct tg_floor *s, fl_conn_t *c) {
  ssize_t n = read(c->fd, c->rx + c->rx_len, FL_RX_CAP - c->rx_len);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    ep_close(s, c);
    return;
  }
  if (n < 0) return;
  c->rx_len += (size_t)n;
  if (rx_frames(c) != 0) {
    ep_close(s, c);
    return;
  }
  if (!c->want_out) ep_flush(s, c);
}

static void ep_main(void *arg) {
  struct tg_floor *s = arg;
  pthread_setname_np(pthread_self(), "floor-epoll"); /* for perf -t and /proc */
  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(s->epfd, evs, 64, -1);
    if (n < 0 && errno != EINTR) lg_die("epoll floor: epoll_wait", -errno);
    for (int i = 0; i < n; i++) {
      uint32_t k = evs[i].data.u32;
      if (k == EP_STOP) return;
      if (k == EP_LISTEN) {
        ep_accept(s);
        continue;
      }
      fl_conn_t *c = &s->conns[k];
      if (!c->used) continue;
      if (evs[i].events & EPOLLOUT) ep_flush(s, c);
      if (c->used && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) ep_input(s, c);
    }
  }
}

/* The listener, the stop eventfd and the epoll set; returns the port. */
static uint16_t ep_open(struct tg_floor *s) {
  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->epfd < 0 || s->stop_fd < 0 || s->lfd < 0) lg_die("epoll floor: setup", -errno);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(s->lfd, (const struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, 128) != 0 ||
      getsockname(s->lfd, (struct sockaddr *)&a, &len) != 0)
    lg_die("epoll floor: listen", -errno);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = EP_LISTEN};
  struct epoll_event st = {.events = EPOLLIN, .data.u32 = EP_STOP};
  if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) != 0 ||
      epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->stop_fd, &st) != 0)
    lg_die("epoll floor: epoll_ctl", -errno);
  return ntohs(a.sin_port);
}

static void on_stop(uv_async_t *h) {
  struct tg_floor *s = h->data;
  for (uint32_t i = 0; i < FL_MAX_CONNS; i++)
    if (s->conns[i].used) conn_close(&s->conns[i]);
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_close((uv_handle_t *)&s->stop, NULL);
  if (s->kind == TG_COMMIT) {
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->poll, NULL);
  }
}

static void loop_main(void *arg) {
  struct tg_floor *s = arg;
  pthread_setname_np(pthread_self(), s->kind == TG_COMMIT ? "floor-commit" : "floor-echo");
  uv_run(&s->loop, UV_RUN_DEFAULT);
}

/* The commit file: created in dir, unlinked at once (only its blocks
 * matter), zero-filled and synced so a commit's fdatasync flushes data,
 * not extent conversions. */
static void commit_open(struct tg_floor *s, const char *dir, uint64_t bytes) {
  char path[512];
  snprintf(path, sizeof path, "%s/bench_floor_commit.XXXXXX", dir);
  s->fd = mkstemp(path);
  if (s->fd < 0) lg_die("floor server: commit file", -errno);
  unlink(path);
  s->file_size = (bytes + FL_MiB - 1) / FL_MiB * FL_MiB;
  if (s->file_size == 0) s->file_size = FL_MiB;
  uint8_t *zeros = calloc(1, FL_MiB);
  if (zeros == NULL) lg_die("floor server: commit file", -ENOMEM);
  for (uint64_t off = 0; off < s->file_size; off += FL_MiB)
    if (pwrite(s->fd, zeros, FL_MiB, (off_t)off) != (ssize_t)FL_MiB)
      lg_die("floor server: zero-fill", -errno);
  free(zeros);
  if (fdatasync(s->fd) != 0) lg_die("floor server: fdatasync", -errno);
  s->acc_cap = s->fly_cap = 64u * 1024u;
  s->acc = malloc(s->acc_cap);
  s->fly = malloc(s->fly_cap);
  if (s->acc == NULL || s->fly == NULL) lg_die("floor server: batch", -ENOMEM);
  int rc = io_uring_queue_init(8, &s->ring, 0);
  if (rc < 0) lg_die("floor server: io_uring_queue_init", rc);
  s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->efd < 0) lg_die("floor server: eventfd", -errno);
  if ((rc = io_uring_register_eventfd(&s->ring, s->efd)) < 0)
    lg_die("floor server: io_uring_register_eventfd", rc);
  uv_check_init(&s->loop, &s->check);
  s->check.data = s;
  uv_check_start(&s->check, on_check);
  uv_poll_init(&s->loop, &s->poll, s->efd);
  s->poll.data = s;
  uv_poll_start(&s->poll, UV_READABLE, on_ring);
}

tg_floor_t *tg_floor_start(tg_floor_kind_t kind, const char *dir, uint64_t file_bytes,
                           uint32_t sessions, uint32_t keepalive_ms, lg_fleet_t *f) {
  struct tg_floor *s = calloc(1, sizeof *s);
  if (s == NULL) lg_die("floor server", -ENOMEM);
  s->kind = kind;
  s->fd = s->efd = -1;
  /* Ids of the gateway's magnitude after a few runs, so varints match. */
  s->next_order_id = 1u << 14;
  s->conns = calloc(FL_MAX_CONNS, sizeof *s->conns);
  s->arena_buf = malloc(HG_WIRE_ARENA_SIZE(FL_MAX_FRAME));
  if (s->conns == NULL || s->arena_buf == NULL) lg_die("floor server", -ENOMEM);
  hg_wire_arena_init(&s->arena, s->arena_buf, HG_WIRE_ARENA_SIZE(FL_MAX_FRAME));
  uint16_t port = 0;
  int rc;
  if (kind == TG_EPOLL) {
    s->fd = s->efd = s->epfd = s->lfd = s->stop_fd = -1;
    port = ep_open(s);
    if ((rc = uv_thread_create(&s->thread, ep_main, s)) != 0) lg_die("epoll floor: thread", rc);
  } else {
    if ((rc = uv_loop_init(&s->loop)) != 0) lg_die("floor server: loop", rc);
    uv_async_init(&s->loop, &s->stop, on_stop);
    s->stop.data = s;
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&a, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 128, on_connection)) != 0)
      lg_die("floor server: listen", rc);
    struct sockaddr_in bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
    port = ntohs(bound.sin_port);
    if (kind == TG_COMMIT) commit_open(s, dir, file_bytes);
    /* Every handle is set up before the loop thread starts; from now on only
     * that thread touches them (tg_floor_stop signals through the async). */
    if ((rc = uv_thread_create(&s->thread, loop_main, s)) != 0) lg_die("floor server: thread", rc);
  }
  /* Any secret does: the floor does not check the proof. */
  rc = lg_fleet_login(f, port, TG_KEY_BASE, sessions, ts_key_secret, keepalive_ms);
  if (rc != 0) lg_die("login", rc);
  return s;
}

tg_floor_stats_t tg_floor_stats(const tg_floor_t *s) {
  tg_floor_stats_t st;
  st.orders = atomic_load_explicit(&s->orders, memory_order_relaxed); /* counters */
  st.commits = atomic_load_explicit(&s->commits, memory_order_relaxed);
  st.records = atomic_load_explicit(&s->records, memory_order_relaxed);
  return st;
}

void tg_floor_stop(tg_floor_t *s, lg_fleet_t *f) {
  lg_fleet_close(f);
  if (s->kind == TG_EPOLL) {
    uint64_t one = 1;
    if (write(s->stop_fd, &one, sizeof one) != sizeof one) lg_die("epoll floor: stop", -errno);
    uv_thread_join(&s->thread);
    for (uint32_t i = 0; i < FL_MAX_CONNS; i++)
      if (s->conns[i].used) ep_close(s, &s->conns[i]);
    close(s->lfd);
    close(s->stop_fd);
    close(s->epfd);
  } else {
    uv_async_send(&s->stop);
    uv_thread_join(&s->thread);
    uv_loop_close(&s->loop);
  }
  if (s->kind == TG_COMMIT) {
    /* A commit still in flight ends before its buffer is freed. */
    struct io_uring_cqe *cqe;
    while (s->cqes_left > 0 && io_uring_wait_cqe(&s->ring, &cqe) == 0) {
      io_uring_cqe_seen(&s->ring, cqe);
      s->cqes_left--;
    }
    io_uring_queue_exit(&s->ring);
    close(s->efd);
    close(s->fd);
    free(s->acc);
    free(s->fly);
  }
  for (uint32_t i = 0; i < FL_MAX_CONNS; i++) free(s->conns[i].tx);
  free(s->conns);
  free(s->arena_buf);
  free(s);
}
