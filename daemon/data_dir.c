/*
 * data_dir.c - hourglassd's data directory: creating it, the LOCK that
 * keeps a second writer out (described at the top of hourglassd.c), and
 * naming the disk when a write fails for want of space.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "daemon_log.h"
#include "hourglass/error.h"
#include "hourglassd.h"

/* Where the data directory lives: the mount point of its filesystem (from
 * /proc/self/mountinfo, matched by device number) into mnt, "?" if unknown. */
static void mount_point(const char *dir, char *mnt, size_t cap) {
  snprintf(mnt, cap, "?");
  struct stat st;
  if (stat(dir, &st) != 0) return;
  FILE *f = fopen("/proc/self/mountinfo", "r");
  if (f == NULL) return;
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned maj, min;
    char point[512];
    /* id parent major:minor root mount-point ... */
    if (sscanf(line, "%*u %*u %u:%u %*s %511s", &maj, &min, point) != 3) continue;
    if (makedev(maj, min) == st.st_dev) snprintf(mnt, cap, "%s", point); /* the last one wins */
  }
  fclose(f);
}

/* A write failed for want of space: names the disk holding the data
 * directory, whatever file the failing write was for (a key store, the
 * journal, the lock). Returns 1 when rc is such an error (and logged). */
int daemon_disk_full(const char *data_dir, int rc) {
  if (rc != -ENOSPC && rc != -EDQUOT) return 0;
  char mnt[512];
  mount_point(data_dir, mnt, sizeof mnt);
  struct statvfs vs;
  unsigned long long avail = 0;
  if (statvfs(data_dir, &vs) == 0) avail = (unsigned long long)vs.f_bavail * vs.f_frsize;
  hg_dlog(HG_LOG_ERROR, "daemon",
          rc == -ENOSPC ? "no space left on the disk holding the data directory"
                        : "disk quota exceeded on the disk holding the data directory",
          "data_dir=%s mount=%s available_bytes=%llu err=%s", data_dir, mnt, avail,
          hg_strerror(rc));
  return 1;
}

/*
 * Takes data_dir/LOCK (see the top of this file) for the rest of the
 * process's life and writes the pid into it. Returns 0; EXIT_LOCKED when
 * another process holds it; EXIT_START when the file cannot be had or
 * written. Every failure is logged. The descriptor is deliberately never
 * closed: closing it would drop the lock.
 */
int daemon_lock_data_dir(const char *data_dir) {
  char path[HG_DCFG_PATH_MAX + 8];
  snprintf(path, sizeof path, "%s/LOCK", data_dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    int rc = -errno;
    if (!daemon_disk_full(data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "cannot open the data directory's lock file",
              "file=%s err=%s", path, hg_strerror(rc));
    return EXIT_START;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      char pid[24] = "";
      ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
      pid[n > 0 ? n : 0] = '\0';
      pid[strcspn(pid, "\n")] = '\0';
      hg_dlog(HG_LOG_ERROR, "daemon",
              "data directory in use by a running hourglassd; stop it first (or use a "
              "read-only tool)",
              "data_dir=%s pid=%s lock=%s", data_dir, pid[0] ? pid : "?", path);
      close(fd);
      return EXIT_LOCKED;
    }
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot lock the data directory", "file=%s err=%s", path,
            strerror(e));
    close(fd);
    return EXIT_START;
  }
  char pid[24];
  int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  int rc = 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) rc = errno ? -errno : -EIO;
  if (rc != 0) {
    if (!daemon_disk_full(data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "cannot write the data directory's lock file",
              "file=%s err=%s", path, hg_strerror(rc));
    close(fd);
    return EXIT_START;
  }
  return 0;
}

int daemon_mkdir_p(const char *path) {
  char tmp[HG_DCFG_PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0750) != 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(tmp, 0750) != 0 && errno != EEXIST) return -errno;
  return 0;
}

