#!/usr/bin/env bash
# The whole test suite on Python 3.14, the Python Hermes 0.21's installer brings, with the SQLite it links:
# Debian's python3.14 in a Debian unstable root made by debootstrap (this machine's Debian has 3.11 only).
# Needs root, and Debian's and PyPI's registries; debootstrap comes from Debian's packages when missing.
# hermes-agent 0.19.0 declares Python < 3.14: it is installed past that bound as the plugin's host (Hermes 0.21
# itself is on no registry). The root and its venv stay in PHR_PY314_ROOT (default /tmp/phr-py314) for the
# next run; the checkout is cloned in fresh each time, with its changes not committed yet.
# Usage: scripts/test-python314.sh [pytest arguments]   (make test-py314)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${PHR_PY314_ROOT:-/tmp/phr-py314}

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
# chattr: the tests that deny root a write (test_semantic_faults) need it.
PACKAGES=python3.14,python3.14-venv,ca-certificates,git,e2fsprogs
if [ ! -x "$ROOT/usr/bin/python3.14" ]; then
  debootstrap --variant=minbase --include="$PACKAGES" sid "$ROOT" http://deb.debian.org/debian
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
if [ ! -x "$ROOT/usr/bin/chattr" ]; then  # a root made before chattr was asked for
  chroot "$ROOT" apt-get install -y -qq ${PACKAGES//,/ } >/dev/null
fi
# A registry reached through a proxy with its own certificate authority: pip in the root trusts what the host does.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
fi

mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done; }
trap cleanup EXIT
for target in proc dev dev/pts dev/shm; do
  if ! mountpoint -q "$ROOT/$target"; then
    if [ "$target" = dev/shm ]; then mount -t tmpfs tmpfs "$ROOT/$target"; else mount --bind "/$target" "$ROOT/$target"; fi
    mounted+=("$ROOT/$target")
  fi
done

rm -rf "$ROOT/src" && git clone -q . "$ROOT/src"
git ls-files -z --modified --others --exclude-standard | xargs -0 -r cp --parents -t "$ROOT/src"
cp requirements-test.txt "$ROOT/requirements-test.txt"
# A clean environment: the host's pip settings (its own wheel folders, say) mean nothing in the root.
in_root() {
  chroot "$ROOT" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
}
if ! cmp -s "$ROOT/requirements-test.txt" "$ROOT/venv/.installed" 2>/dev/null; then
  in_root python3.14 -m venv /venv
  in_root /venv/bin/pip install -q --ignore-requires-python -r /requirements-test.txt
  cp "$ROOT/requirements-test.txt" "$ROOT/venv/.installed"
fi
in_root git config --global user.name >/dev/null || in_root git config --global user.name "phr tests"
in_root git config --global user.email >/dev/null || in_root git config --global user.email "phr-tests@localhost"
ln -sfn /venv "$ROOT/src/.venv"
in_root /venv/bin/python -c 'import sqlite3, sys; print(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")'
in_root bash -c 'cd /src && exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"' pytest "$@"
