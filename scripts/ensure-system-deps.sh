#!/usr/bin/env bash
# Installs the Debian packages the project needs, once, and (as root) creates the
# unprivileged user the plane agents run Chromium as, so its sandbox can stay on.
# Idempotent: when every binary is on PATH and the user exists it does nothing.
# Called by `npm start` and `npm test`.
set -euo pipefail

# The agents run as root here (CI, containers): Chromium refuses its sandbox as root,
# so they start it as this user (no home, no login shell). An agent that is not root
# runs Chromium as itself and needs no such user.
ensure_browser_user() {
  local user="${PLANE_BROWSER_USER:-runplane-browser}"
  [ "$(id -u)" -eq 0 ] || return 0
  getent passwd "$user" >/dev/null 2>&1 && return 0
  echo "runplane: creating the browser user $user" >&2
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
}

# binary -> Debian package
declare -A NEEDS=(
  [redis-server]=redis-server
  [chromium]=chromium
  # dom_plane's lighter browser (PLANE_DOM_BROWSER=headless-shell)
  [chromium-headless-shell]=chromium-headless-shell
  [Xvfb]=xvfb
  [xdotool]=xdotool
  # computer_plane binds characters beyond the display's keyboard before xdotool types them
  [xkbcomp]=x11-xkb-utils
  [ffmpeg]=ffmpeg
  [ffprobe]=ffmpeg
  # the plane tests make a self-signed certificate for TLS
  [openssl]=openssl
  # the agents drop to the browser user with setpriv
  [setpriv]=util-linux
  # the viewer test checks its exported ZIP with unzip -t
  [unzip]=unzip
)

missing=()
for bin in "${!NEEDS[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${NEEDS[$bin]}")
done
# fonts make screenshots of text legible; checked by file, not by binary
[ -d /usr/share/fonts/truetype/liberation ] || missing+=(fonts-liberation)
# Chromium's locales: without them its UI locale, and so Intl's default locale in pages and
# workers, is en-US whatever --lang and LANG say (a Berlin exit showed en-US number formats)
[ -f /usr/lib/chromium/locales/de.pak ] || missing+=(chromium-l10n)
# the tests start throwaway PostgreSQL clusters (the store of record at scale); Debian keeps its binaries off PATH
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)

if [ ${#missing[@]} -eq 0 ]; then
  ensure_browser_user
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" -ne 0 ]; then
  echo "runplane: missing system packages: ${missing[*]}" >&2
  echo "runplane: install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "runplane: installing system packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
ensure_browser_user
