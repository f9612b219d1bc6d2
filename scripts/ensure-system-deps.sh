#!/usr/bin/env bash
# Installs the Debian packages the project needs, once. Idempotent: when every
# binary is already on PATH it does nothing. Called by `npm start` and `npm test`.
set -euo pipefail

# binary -> Debian package
declare -A NEEDS=(
  [redis-server]=redis-server
  [chromium]=chromium
  [Xvfb]=xvfb
  [xdotool]=xdotool
  [ffmpeg]=ffmpeg
  [ffprobe]=ffmpeg
  # the plane tests make a self-signed certificate for TLS
  [openssl]=openssl
)

missing=()
for bin in "${!NEEDS[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${NEEDS[$bin]}")
done
# fonts make screenshots of text legible; checked by file, not by binary
[ -d /usr/share/fonts/truetype/liberation ] || missing+=(fonts-liberation)

if [ ${#missing[@]} -eq 0 ]; then
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
