# Shared by ops/ scripts: locate the tree, make sure packages exist, build.
# Sourced, not run.
HG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HG_BUILD=${HG_BUILD_DIR:-$HG_ROOT/build}
HG_JOBS=$(nproc 2>/dev/null || echo 2)

hg_setup_if_missing() {
  if ! "$HG_ROOT/ops/setup" --check >/dev/null 2>&1; then
    "$HG_ROOT/ops/setup"
  fi
}

# hg_build <name> [cmake args...]: configure and build into $HG_BUILD/<name>.
hg_build() {
  local name=$1; shift
  cmake -S "$HG_ROOT" -B "$HG_BUILD/$name" -DHG_WERROR=ON "$@" >/dev/null
  cmake --build "$HG_BUILD/$name" -j "$HG_JOBS"
}

# hg_demo_keys FILE: the demo's API keys (ops/rotate-key's format), the
# operator and the demo's trader, risk viewer and market maker, each added
# with a fresh secret when FILE lacks it: made on first start and kept, so
# that every terminal's exports survive a restart.
hg_demo_keys() {
  local keys=$1 k
  (umask 077 && touch "$keys")
  for k in "1 operator 0 0" "3001 trader 3001 300" "3002 risk_viewer 0 300" "3003 market_maker 3003 300"; do
    awk -v id="${k%% *}" '$1 == id { found = 1 } END { exit !found }' "$keys" ||
      printf '%s %s\n' "$k" "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >>"$keys"
  done
}

# hg_demo_cert DIR: a self-signed certificate for 127.0.0.1, ::1 and
# localhost in DIR/demo.pem (key DIR/demo.key), made when missing; being
# self-signed, it is also the CA clients trust (HG_CA=DIR/demo.pem).
hg_demo_cert() {
  local tdir=$1
  [ -s "$tdir/demo.pem" ] && [ -s "$tdir/demo.key" ] && return 0
  mkdir -p "$tdir"
  chmod 700 "$tdir"
  (umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -days 365 -subj "/CN=hourglass demo" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
    -addext "keyUsage=critical,digitalSignature,keyCertSign" \
    -addext "extendedKeyUsage=serverAuth" \
    -keyout "$tdir/demo.key" -out "$tdir/demo.pem" 2>/dev/null)
  echo "ops/run: made a self-signed certificate for the demo: $tdir/demo.pem" >&2
}
