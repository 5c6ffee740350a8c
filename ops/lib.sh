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
