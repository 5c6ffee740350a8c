/*
 * link_proxy.c - the relay of link_proxy.h: one poll() loop on its own
 * thread over the front listeners and every relayed connection (a pair of
 * non-blocking sockets, one buffer per direction: a side is read only when
 * the buffer towards the other is empty, so a slow reader slows its sender
 * and nothing grows). The cut matrix is written under a mutex by lp_cut and
 * copied by the loop when its generation changes; the loop wakes every
 * 20 ms to see it.
 */
#include "link_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536
#define HANDSHAKE 16 /* u64 protocol, u64 sender id */

typedef struct dir {
  uint8_t buf[BUF];
  size_t len, off; /* pending bytes are buf[off..len) */
} dir_t;

typedef struct conn {
  int cfd, sfd;   /* the sender's socket (accepted), the receiver's (connected); -1: none */
  int dst, src;   /* node ids; src 0 until the handshake is read */
  int black;      /* the link is cut: everything read is dropped */
  uint8_t hs[HANDSHAKE];
  size_t hs_n;
  dir_t up, down; /* sender -> receiver, receiver -> sender */
} conn_t;

struct lp_proxy {
  int n;
  int back[LP_MAX_NODES];
  int lfd[LP_MAX_NODES];
  pthread_t thread;
  atomic_int stop;
  pthread_mutex_t mu;            /* guards cut, gen */
  unsigned char cut[LP_MAX_NODES + 1][LP_MAX_NODES + 1];
  unsigned gen;
  conn_t *conns[LP_MAX_CONNS];   /* loop thread only; owned */
};

static int nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void conn_close(lp_proxy_t *p, int i) {
  conn_t *c = p->conns[i];
  if (c->cfd >= 0) close(c->cfd);
  if (c->sfd >= 0) close(c->sfd);
  free(c);
  p->conns[i] = NULL;
}

static int connect_back(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || nonblock(fd) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The handshake is in: learn the link, and open the receiver's side unless
 * the link is cut. 0, or -1 to close the connection. */
static int handshake_done(lp_proxy_t *p, conn_t *c, unsigned char cut[][LP_MAX_NODES + 1]) {
  uint64_t id = 0;
  for (int k = 7; k >= 0; k--) id = id << 8 | c->hs[8 + k];
  if (id == 0 || id > (uint64_t)p->n) return -1;
  c->src = (int)id;
  c->black = cut[c->src][c->dst];
  if (c->black) return 0;
  c->sfd = connect_back(p->back[c->dst - 1]);
  if (c->sfd < 0) return -1;
  memcpy(c->up.buf, c->hs, HANDSHAKE);
  c->up.off = 0;
  c->up.len = HANDSHAKE;
  return 0;
}

/* Reads what fd has into d (or drops it when black). 0, or -1 at EOF or on
 * an error. */
static int pump_in(int fd, dir_t *d, int black) {
  uint8_t junk[4096];
  ssize_t r = black ? read(fd, junk, sizeof junk) : read(fd, d->buf, sizeof d->buf);
  if (r == 0) return -1;
  if (r < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
  if (!black) {
    d->off = 0;
    d->len = (size_t)r;
  }
  return 0;
}

static int pump_out(int fd, dir_t *d) {
  ssize_t w = send(fd, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
  if (w < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
  d->off += (size_t)w;
  if (d->off == d->len) d->off = d->len = 0;
  return 0;
}

static void accept_one(lp_proxy_t *p, int node) {
  int fd = accept4(p->lfd[node - 1], NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return;
  int slot = -1;
  for (int i = 0; i < LP_MAX_CONNS && slot < 0; i++)
    if (p->conns[i] == NULL) slot = i;
  conn_t *c = slot >= 0 ? calloc(1, sizeof *c) : NULL;
  if (c == NULL || nonblock(fd) != 0) {
    free(c);
    close(fd);
    return;
  }
  c->cfd = fd;
  c->sfd = -1;
  c->dst = node;
  p->conns[slot] = c;
}

static void *loop(void *arg) {
  lp_proxy_t *p = arg;
  unsigned char cut[LP_MAX_NODES + 1][LP_MAX_NODES + 1];
  unsigned seen = (unsigned)-1;
  struct pollfd pf[LP_MAX_NODES + 2 * LP_MAX_CONNS];
  int who[LP_MAX_NODES + 2 * LP_MAX_CONNS]; /* conn index * 2 + side, for pf beyond n */
  while (!atomic_load(&p->stop)) {
    pthread_mutex_lock(&p->mu);
    int changed = p->gen != seen;
    if (changed) {
      memcpy(cut, p->cut, sizeof cut);
      seen = p->gen;
    }
    pthread_mutex_unlock(&p->mu);
    if (changed) {
      for (int i = 0; i < LP_MAX_CONNS; i++) {
        conn_t *c = p->conns[i];
        if (c == NULL || c->src == 0) continue;
        if (cut[c->src][c->dst] && !c->black) {
          c->black = 1;
          c->up.len = c->up.off = c->down.len = c->down.off = 0;
        } else if (!cut[c->src][c->dst] && c->black) {
          conn_close(p, i);
        }
      }
    }
    int k = 0;
    for (int i = 0; i < p->n; i++) pf[k++] = (struct pollfd){.fd = p->lfd[i], .events = POLLIN};
    for (int i = 0; i < LP_MAX_CONNS; i++) {
      conn_t *c = p->conns[i];
      if (c == NULL) continue;
      short ce = 0, se = 0;
      if (c->src == 0 || c->black || c->up.len == 0) ce |= POLLIN;
      if (c->down.len > 0) ce |= POLLOUT;
      if (c->black || c->down.len == 0) se |= POLLIN;
      if (c->up.len > 0) se |= POLLOUT;
      who[k] = i * 2;
      pf[k++] = (struct pollfd){.fd = c->cfd, .events = ce};
      if (c->sfd >= 0) {
        who[k] = i * 2 + 1;
        pf[k++] = (struct pollfd){.fd = c->sfd, .events = se};
      }
    }
    if (poll(pf, (nfds_t)k, 20) <= 0) continue;
    for (int j = 0; j < p->n; j++)
      if (pf[j].revents & POLLIN) accept_one(p, j + 1);
    for (int j = p->n; j < k; j++) {
      int i = who[j] / 2, side = who[j] % 2;
      conn_t *c = p->conns[i];
      if (c == NULL || pf[j].revents == 0) continue;
      int bad = 0;
      if (side == 0) {
        if (c->src == 0 && (pf[j].revents & (POLLIN | POLLHUP | POLLERR))) {
          ssize_t r = read(c->cfd, c->hs + c->hs_n, HANDSHAKE - c->hs_n);
          if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) bad = 1;
          if (r > 0 && (c->hs_n += (size_t)r) == HANDSHAKE) bad = handshake_done(p, c, cut);
        } else {
          if (!bad && (pf[j].revents & POLLOUT)) bad = pump_out(c->cfd, &c->down);
          if (!bad && (pf[j].revents & (POLLIN | POLLHUP | POLLERR)))
            bad = pump_in(c->cfd, &c->up, c->black);
        }
      } else {
        if (pf[j].revents & POLLOUT) bad = pump_out(c->sfd, &c->up);
        if (!bad && (pf[j].revents & (POLLIN | POLLHUP | POLLERR)))
          bad = pump_in(c->sfd, &c->down, c->black);
      }
      if (bad) conn_close(p, i);
    }
  }
  return NULL;
}

int lp_start(int n, const int *front, const int *back, lp_proxy_t **out) {
  *out = NULL;
  if (n < 1 || n > LP_MAX_NODES) return -EINVAL;
  lp_proxy_t *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  p->n = n;
  pthread_mutex_init(&p->mu, NULL);
  int rc = 0;
  for (int i = 0; i < n; i++) p->lfd[i] = -1;
  for (int i = 0; i < n && rc == 0; i++) {
    p->back[i] = back[i];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)front[i]);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        nonblock(fd) != 0)
      rc = -errno;
    p->lfd[i] = fd;
  }
  if (rc == 0) rc = -pthread_create(&p->thread, NULL, loop, p);
  if (rc != 0) {
    for (int i = 0; i < n; i++)
      if (p->lfd[i] >= 0) close(p->lfd[i]);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void lp_cut(lp_proxy_t *p, int a, int b, int cut) {
  pthread_mutex_lock(&p->mu);
  for (int x = 1; x <= p->n; x++) {
    if (x == b || (a != 0 && x != a)) continue;
    p->cut[x][b] = p->cut[b][x] = (unsigned char)(cut != 0);
  }
  p->gen++;
  pthread_mutex_unlock(&p->mu);
}

void lp_stop(lp_proxy_t *p) {
  if (p == NULL) return;
  atomic_store(&p->stop, 1);
  pthread_join(p->thread, NULL);
  for (int i = 0; i < LP_MAX_CONNS; i++)
    if (p->conns[i] != NULL) conn_close(p, i);
  for (int i = 0; i < p->n; i++) close(p->lfd[i]);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
