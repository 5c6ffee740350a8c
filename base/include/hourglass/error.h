/*
 * hourglass/error.h - error codes shared by every Hourglass module.
 *
 * Functions return int: 0 on success, a negative value on failure. System
 * errors are returned as -errno (for example -ENOMEM, -EIO); Hourglass's own
 * errors live in a reserved negative band starting at HG_ERRNO_BASE, well
 * below any errno value. One X-macro table, HG_ERRNO_MAP, generates both the
 * codes and the strings returned by hg_strerror().
 *
 * Order rejects are not errors: the book and the exchange report them as
 * events carrying a reason code (see hourglass/book.h).
 */
#ifndef HOURGLASS_ERROR_H
#define HOURGLASS_ERROR_H

#define HG_ERRNO_BASE (-30000)

/* XX(name, offset, message). Offsets are stable: never renumber. */
#define HG_ERRNO_MAP(XX)                                                        \
  XX(INVAL,     1, "invalid argument")                                          \
  XX(NOTFOUND,  2, "not found")                                                 \
  XX(EXISTS,    3, "already exists")                                            \
  XX(FULL,      4, "capacity exhausted")                                        \
  XX(BUSY,      5, "busy: queue full, try again")                               \
  XX(CORRUPT,   6, "data is corrupt")                                           \
  XX(VERSION,   7, "unsupported format version")                                \
  XX(RANGE,     8, "value out of range")                                        \
  XX(OVERFLOW,  9, "arithmetic overflow")                                       \
  XX(STATE,    10, "operation not allowed in the current state")                \
  XX(UNAVAIL,  11, "exchange unavailable")                                      \
  XX(PARSE,    12, "malformed input")                                           \
  XX(MAPFULL,  13, "state store is full (LMDB map size reached)")               \
  XX(AUTH,     14, "authentication failed")                                     \
  XX(PERM,     15, "not permitted for this role")                                \
  XX(TLS,      16, "TLS failed (certificate not trusted, wrong name, or refused by the peer)")

enum {
#define HG_ERRNO_ENUM(name, off, msg) HG_E##name = HG_ERRNO_BASE - (off),
  HG_ERRNO_MAP(HG_ERRNO_ENUM)
#undef HG_ERRNO_ENUM
};

/*
 * Returns a static, NUL-terminated description of err: an HG_E* code, a
 * negative errno value, or 0 ("ok"). Unknown codes give "unknown error".
 * Thread-safe; the returned pointer stays valid for the life of the process.
 */
const char *hg_strerror(int err);

/* Returns the symbolic name ("HG_EFULL", "ENOSPC", ...) of err, or "UNKNOWN". */
const char *hg_err_name(int err);

#endif /* HOURGLASS_ERROR_H */
