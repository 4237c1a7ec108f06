# Sourced by scripts/services/*.sh: install Debian packages quietly, as root or via sudo.
#   apt_install WHO PACKAGE...
# Refreshes the package lists only when a package cannot be found without them (a fresh
# image has none); waits for another apt/dpkg to finish rather than failing on its lock;
# prints apt's output only when something fails. WHO names the caller in error messages.
apt_install() {
  local who="$1"; shift
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
      echo "$who: $* missing and this user cannot install them (not root, no sudo)" >&2
      return 1
    }
    sudo="sudo -n"
  fi
  local apt=(apt-get -o DPkg::Lock::Timeout=600) log package
  log="$(mktemp)"
  for package in "$@"; do
    if ! apt-cache show "$package" >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive $sudo "${apt[@]}" update -qq >"$log" 2>&1 \
        || { cat "$log" >&2; rm -f "$log"; return 1; }
      break
    fi
  done
  DEBIAN_FRONTEND=noninteractive $sudo "${apt[@]}" install -y -qq --no-install-recommends "$@" \
    >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; return 1; }
  rm -f "$log"
}
