/*
 * daemon_util.c - child processes, log files, loopback HTTP and directories
 * for the hourglassd integration tests (see daemon_util.h).
 */
#include "daemon_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pipeline_util.h"

/* Children started by du_spawn and not yet reaped, so that a failed test
 * never leaves a daemon running (du_kill_all in the teardown). */
static pid_t g_children[16];

void du_rm_rf(const char *dir) { util_rm_rf(dir); }

char *du_tmpdir(char *buf, size_t cap, const char *tag) {
  char cwd[512];
  if (getcwd(cwd, sizeof cwd) == NULL) return NULL;
  if ((size_t)snprintf(buf, cap, "%s/hgtest-%s-XXXXXX", cwd, tag) >= cap) return NULL;
  return mkdtemp(buf);
}

double du_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void du_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* hourglassd's argv with "-o pipeline.mode=M" after argv[0] when
 * $HG_TEST_PIPE_MODE names a mode; argv itself otherwise. Built before the
 * fork: the child only execs. */
static char *const *mode_argv(char *const argv[], char **buf, size_t cap) {
  static char opt[64];
  const char *mode = getenv("HG_TEST_PIPE_MODE");
  const char *base = strrchr(argv[0], '/');
  base = base != NULL ? base + 1 : argv[0];
  if (mode == NULL || *mode == '\0' || strcmp(base, "hourglassd") != 0) return argv;
  size_t n = 0;
  while (argv[n] != NULL) n++;
  if (n + 3 > cap) return argv;
  snprintf(opt, sizeof opt, "pipeline.mode=%s", mode);
  buf[0] = argv[0];
  buf[1] = (char *)"-o";
  buf[2] = opt;
  for (size_t i = 1; i <= n; i++) buf[i + 2] = argv[i];
  return buf;
}

pid_t du_spawn(char *const argv[], const char *log) {
  char *buf[128];
  argv = mode_argv(argv, buf, sizeof buf / sizeof buf[0]);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  for (int i = 0; i < 16; i++) {
    if (g_children[i] == 0) {
      g_children[i] = pid;
      break;
    }
  }
  return pid;
}

char *du_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t got = fread(b, 1, (size_t)n, f);
  b[got] = '\0';
  fclose(f);
  return b;
}

char *du_wait_log(const char *log, const char *needle, double timeout_s) {
  double end = du_now() + timeout_s;
  for (;;) {
    char *b = du_read(log);
    if (strstr(b, needle) != NULL) return b;
    free(b);
    if (du_now() > end) return NULL;
    du_sleep_ms(20);
  }
}

int du_field(const char *text, const char *line_has, const char *key, char *out, size_t cap) {
  const char *best = NULL;
  for (const char *p = text; (p = strstr(p, line_has)) != NULL; p++) best = p;
  if (best == NULL) return -1;
  const char *eol = strchr(best, '\n');
  char k[64];
  snprintf(k, sizeof k, "%s=", key);
  const char *v = strstr(best, k);
  if (v == NULL || (eol != NULL && v > eol)) return -1;
  v += strlen(k);
  size_t n = strcspn(v, " \n\"");
  if (n >= cap) return -1;
  memcpy(out, v, n);
  out[n] = '\0';
  return 0;
}

char *du_http_raw(int port, const char *req, size_t len, int want_responses) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t cap = 1 << 16, n = 0;
  char *buf = calloc(1, cap);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return buf;
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (want_responses < 0) shutdown(fd, SHUT_WR);
  for (;;) {
    if (n + 4096 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
    if (r <= 0) break;
    n += (size_t)r;
    buf[n] = '\0';
    if (want_responses > 0) {
      /* complete when the count of headers matches and each body is in */
      int seen = 0;
      const char *p = buf;
      const char *last_body_end = NULL;
      while ((p = strstr(p, "HTTP/1.1 ")) != NULL) {
        const char *cl = strstr(p, "Content-Length: ");
        const char *he = strstr(p, "\r\n\r\n");
        if (cl == NULL || he == NULL) break;
        long blen = strtol(cl + 16, NULL, 10);
        if ((size_t)(he + 4 + blen - buf) > n) break;
        seen++;
        last_body_end = he + 4 + blen;
        p = last_body_end;
      }
      if (seen >= want_responses) break;
    }
  }
  buf[n] = '\0';
  close(fd);
  return buf;
}

char *du_get(int port, const char *path) {
  char req[512];
  int n =
      snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
  return du_http_raw(port, req, (size_t)n, 0);
}

int du_listen_port(const char *log, const char *component) {
  char pat[64];
  snprintf(pat, sizeof pat, "%s msg=\"listening\" addr=127.0.0.1:", component);
  const char *l = strstr(log, pat);
  return l != NULL ? atoi(l + strlen(pat)) : -1;
}

int du_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  int rc = fputs(text, f) < 0 ? -1 : 0;
  return fclose(f) != 0 ? -1 : rc;
}

uint64_t du_metric(int port, const char *name) {
  char *m = du_get(port, "/metrics");
  char pat[128];
  snprintf(pat, sizeof pat, "\n%s ", name);
  const char *p = strstr(m, pat);
  uint64_t v = p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
  free(m);
  return v;
}

int du_status(const char *resp) {
  if (strncmp(resp, "HTTP/1.1 ", 9) != 0) return -1;
  return atoi(resp + 9);
}

void du_forget(pid_t pid) {
  for (int i = 0; i < 16; i++)
    if (g_children[i] == pid) g_children[i] = 0;
}

int du_stop(pid_t pid, int sig, double timeout_s) {
  du_forget(pid);
  if (sig) kill(pid, sig);
  double end = du_now() + timeout_s;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
    if (du_now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    du_sleep_ms(10);
  }
}

int du_kill_all(void **state) {
  (void)state;
  for (int i = 0; i < 16; i++) {
    if (g_children[i] > 0) {
      kill(g_children[i], SIGKILL);
      waitpid(g_children[i], NULL, 0);
      g_children[i] = 0;
    }
  }
  return 0;
}

/* 1 if a TCP socket can bind 127.0.0.1:port now. */
static int port_bindable(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

/* Ports are taken below the kernel's ephemeral range: a port the kernel
 * hands out to an outgoing connection (the tests' clients, the Raft links)
 * between our check and the daemon's bind would make that bind fail. Each
 * process starts at its own place in the range and walks it, never giving
 * the same port twice; a port another test chose and bound meanwhile is
 * skipped by the bind check. */
int du_free_port(void) {
  static int lo, hi, next;
  if (lo == 0) {
    int elo = 32768, ehi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
      if (fscanf(f, "%d %d", &elo, &ehi) != 2) elo = 32768, ehi = 60999;
      fclose(f);
    }
    if (elo > 12000) lo = 10000, hi = elo - 1; /* below the ephemeral range */
    else lo = ehi + 1, hi = 65535;             /* above it */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    next = lo + (int)(((unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec) % (unsigned)(hi - lo));
  }
  for (int tries = 0; tries <= hi - lo; tries++) {
    int port = next;
    next = next >= hi ? lo : next + 1;
    if (port_bindable(port)) return port;
  }
  return 0;
}

int du_system(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int du_scenario_run(const char *bin, const char *name, const char *dir, const char *out_file) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s --scenario %s --scenario-dir %s > %s 2> %s.err", bin, name, dir,
           out_file, out_file);
  return du_system(cmd);
}

int du_scenario_runs(du_scenario_runs_t *r, const char *bin, const char *name) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i < 2; i++) {
    char out[1100];
    if (du_tmpdir(r->dir[i], sizeof r->dir[i], name) == NULL) return -1;
    snprintf(out, sizeof out, "%s.out", r->dir[i]);
    double t0 = du_now();
    r->rc[i] = du_scenario_run(bin, name, r->dir[i], out);
    fprintf(stderr, "scenario %s run %d: exit %d in %.2f s\n", name, i + 1, r->rc[i],
            du_now() - t0);
    r->out[i] = du_read(out);
    if (r->out[i] == NULL) return -1;
  }
  return 0;
}

void du_scenario_runs_free(du_scenario_runs_t *r) {
  for (int i = 0; i < 2; i++) {
    char p[1100];
    free(r->out[i]);
    r->out[i] = NULL;
    if (r->dir[i][0] == '\0') continue;
    du_rm_rf(r->dir[i]);
    snprintf(p, sizeof p, "%s.out", r->dir[i]);
    remove(p);
    snprintf(p, sizeof p, "%s.out.err", r->dir[i]);
    remove(p);
  }
}

int du_scenario_hash_replays(const char *bin, const char *dir, const char *out) {
  const char *p = strstr(out, "\nlast_seq=");
  if (p == NULL) return 0;
  long long seq = atoll(p + strlen("\nlast_seq="));
  const char *h = strstr(p, "state_hash=");
  char hash[80];
  if (seq <= 0 || h == NULL || sscanf(h, "state_hash=%64s", hash) != 1) return 0;
  char cmd[3000], file[1100], expect[200];
  snprintf(file, sizeof file, "%s.replay", dir);
  snprintf(cmd, sizeof cmd, "%s --state-hash --upto %lld -o data_dir=%s > %s 2>/dev/null", bin,
           seq, dir, file);
  int ok = du_system(cmd) == 0;
  char *got = du_read(file);
  snprintf(expect, sizeof expect, "last_seq=%lld state_hash=%s\n", seq, hash);
  ok = ok && got != NULL && strcmp(got, expect) == 0;
  free(got);
  remove(file);
  return ok;
}

int du_cluster_plan(du_node_t *node, int n, const char *root, char *members, size_t members_cap,
                    char *nodes, size_t nodes_cap) {
  size_t ml = 0, nl = 0;
  members[0] = nodes[0] = '\0';
  for (int i = 0; i < n; i++) {
    du_node_t *d = &node[i];
    memset(d, 0, sizeof *d);
    d->id = i + 1;
    d->raft_port = du_free_port();
    d->client_port = du_free_port();
    d->http_port = du_free_port();
    if ((size_t)snprintf(d->dir, sizeof d->dir, "%s/n%d", root, d->id) >= sizeof d->dir) return -1;
    ml += (size_t)snprintf(members + ml, members_cap - ml, "%s%d=127.0.0.1:%d/127.0.0.1:%d",
                           i ? "," : "", d->id, d->raft_port, d->client_port);
    if (ml >= members_cap) return -1;
    nl += (size_t)snprintf(nodes + nl, nodes_cap - nl, "%s127.0.0.1:%d", i ? "," : "",
                           d->client_port);
    if (nl >= nodes_cap) return -1;
  }
  return 0;
}

void du_rolling_order(int n, int leader, int *order) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (i != leader) order[k++] = i;
  order[k] = leader;
}

int du_cluster_keys(const char *path, const char *secret_hex) {
  char keys[512];
  snprintf(keys, sizeof keys,
           "1 operator 0 0 %s\n2 trader 1 1 %s\n3 risk_viewer 0 1 %s\n4 trader 1 1 %s\n",
           secret_hex, secret_hex, secret_hex, secret_hex);
  if (du_write_file(path, keys) != 0) return -1;
  return chmod(path, 0600) == 0 ? 0 : -1;
}

int du_log_count(const char *path, const char *needle) {
  char *log = du_read(path);
  size_t len = strlen(needle);
  int n = 0;
  for (const char *p = log; p != NULL && (p = strstr(p, needle)) != NULL; p += len) n++;
  free(log);
  return n;
}

/* Occurrences of "rebuilding ... in place" in the log at path. */
static int log_rebuilds(const char *path) {
  return du_log_count(path, "rebuilding this node from the group in place");
}

void du_node_spawn(du_node_t *node, const char *bin, const char *root, const char *members,
                   const char *keys_file, const char *const *extra) {
  char o_data[700], o_id[32], o_members[600], o_oe[64], o_http[64], o_keys[700];
  snprintf(o_data, sizeof o_data, "data_dir=%s", node->dir);
  snprintf(o_id, sizeof o_id, "cluster.id=%d", node->id);
  snprintf(o_members, sizeof o_members, "cluster.members=%s", members ? members : "");
  snprintf(o_oe, sizeof o_oe, "listen.order_entry=127.0.0.1:%d", node->client_port);
  snprintf(o_http, sizeof o_http, "listen.http=127.0.0.1:%d", node->http_port);
  snprintf(o_keys, sizeof o_keys, "gateway.keys_file=%s", keys_file);
  if (node->starts > 0) node->rebuilds += log_rebuilds(node->log);
  snprintf(node->log, sizeof node->log, "%s/node%d.%d.log", root, node->id, ++node->starts);
  char *fixed[] = {(char *)bin, "-o", o_data, "-o", o_oe, "-o", o_http, "-o", o_keys,
                   "-o", "tls=off", DU_SMALL_OPTS};
  char *argv[sizeof fixed / sizeof fixed[0] + 4 + 2 * 16 + 1];
  size_t k = 0;
  for (; k < sizeof fixed / sizeof fixed[0]; k++) argv[k] = fixed[k];
  if (members != NULL) {
    argv[k++] = "-o";
    argv[k++] = o_id;
    argv[k++] = "-o";
    argv[k++] = o_members;
  }
  for (int i = 0; extra != NULL && extra[i] != NULL && i < 16; i++) {
    if (strncmp(extra[i], "--", 2) != 0) argv[k++] = "-o"; /* a flag goes as it is */
    argv[k++] = (char *)extra[i];
  }
  argv[k] = NULL;
  pid_t pid = du_spawn(argv, node->log);
  node->pid = pid > 0 ? pid : 0;
}

uint64_t du_json_u64(const char *text, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = text != NULL ? strstr(text, pat) : NULL;
  return p != NULL ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* The index of a running node among node[0..n) whose /health says it
 * takes orders (the first found), -1 if none does now. */
static int taking_orders(const du_node_t *node, int n) {
  for (int i = 0; i < n; i++) {
    if (node[i].pid == 0) continue;
    char *h = du_get(node[i].http_port, "/health");
    int yes = h != NULL && strstr(h, "\"taking_orders\":true") != NULL;
    free(h);
    if (yes) return i;
  }
  return -1;
}

int du_cluster_leader(du_node_t *node, int n, double timeout_s, void (*between)(void)) {
  for (double end = du_now() + timeout_s; du_now() < end; du_sleep_ms(50)) {
    if (between != NULL) between();
    int i = taking_orders(node, n);
    if (i >= 0) return i;
  }
  return -1;
}

uint64_t du_cluster_quiesce(du_node_t *node, int n, double timeout_s, void (*between)(void)) {
  for (double end = du_now() + timeout_s; du_now() < end; du_sleep_ms(100)) {
    if (between != NULL) between();
    int leader = taking_orders(node, n);
    if (leader < 0) continue;
    char *h = du_get(node[leader].http_port, "/health");
    uint64_t want = du_json_u64(h, "committed_seq");
    free(h);
    int equal = want != UINT64_MAX;
    for (int i = 0; i < n && equal; i++) {
      if (node[i].pid == 0) continue;
      char *f = du_get(node[i].http_port, "/health");
      equal = du_json_u64(f, "last_seq") == want && du_json_u64(f, "durable_seq") == want;
      free(f);
    }
    if (equal) return want;
  }
  return UINT64_MAX;
}

int du_node_start(du_node_t *node, const char *bin, const char *root, const char *members,
                  const char *keys_file, const char *const *extra) {
  du_node_spawn(node, bin, root, members, keys_file, extra);
  char *log = node->pid != 0 ? du_wait_log(node->log, "msg=\"ready\"", 120) : NULL;
  free(log);
  return log != NULL ? 0 : -1;
}

int du_cluster_supervise(du_node_t *node, int n) {
  for (int i = 0; i < n; i++)
    if (du_node_reap(&node[i]) < 0) return -1;
  return 0;
}

int du_node_reap(du_node_t *node) {
  int st;
  if (node->pid == 0 || waitpid(node->pid, &st, WNOHANG) != node->pid) return 0;
  du_forget(node->pid);
  node->pid = 0;
  char *log = du_read(node->log);
  size_t len = log != NULL ? strlen(log) : 0;
  fprintf(stderr, "node %d: %s %d; the end of its log:\n%s\n", node->id,
          WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
          log != NULL ? log + (len > 4000 ? len - 4000 : 0) : "(none)");
  free(log);
  return -1;
}

int du_node_rebuilds(const du_node_t *node) {
  return node->rebuilds + (node->starts > 0 ? log_rebuilds(node->log) : 0);
}

int du_cluster_rebuilds(const du_node_t *node, int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) sum += du_node_rebuilds(&node[i]);
  return sum;
}

const char *du_daemon_path(const char *given) {
  static char path[PATH_MAX];
  if (given == NULL) given = getenv("HG_HOURGLASSD");
  if (given != NULL) return given;
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return NULL;
  path[n] = '\0';
  for (int k = 0; k < 2; k++) {
    char *slash = strrchr(path, '/');
    if (slash != NULL) *slash = '\0'; /* <build>/bench, then <build> */
  }
  if (strlen(path) + sizeof "/bin/hourglassd" > sizeof path) return NULL;
  strcat(path, "/bin/hourglassd");
  return path;
}
