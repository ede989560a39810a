#!/usr/bin/env bash
# Installs what box needs to build, run and test on Debian 12 (bookworm).
# Idempotent: packages already present are left alone.  Sourced or run.
set -euo pipefail

BOX_DEB_PACKAGES=(
  # build
  build-essential meson ninja-build pkg-config gettext
  libglib2.0-dev libglib2.0-dev-bin libsoup-3.0-dev libjson-glib-dev libgnutls28-dev
  libsqlite3-dev libvirt-dev libarchive-dev libnftables-dev
  # the egress engine: DNS messages (ldns), upstream resolution (unbound), conntrack
  libldns-dev libunbound-dev libnetfilter-conntrack-dev
  # run: libvirt + QEMU for real sandboxes, D-Bus for the admin interface
  libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils dbus nftables
  # guest images and kernels
  mmdebstrap e2fsprogs cpio zstd bc
  # tests
  python3 curl jq sqlite3 tmux iproute2 procps
  # the independent JOSE verifier of identity tokens (tests/e2e/jwtcheck.py)
  python3-jwt python3-cryptography
  # a real ACME server for tests/e2e/test_edge_acme.py
  pebble
  # own-domain certificates made by tests/e2e/test_edge_tls.py
  openssl
  # the browser test of the edge (tests/e2e/test_edge_browser.py): headless
  # Chromium, and certutil for the throw-away NSS database that trusts boxd's CA
  chromium libnss3-tools
  # the SDK's introspection data and reference (-Ddocs), and the gir-check
  # test that loads it with python3-gi
  gobject-introspection libgirepository1.0-dev gi-docgen
  python3-gi gir1.2-glib-2.0 gir1.2-json-1.0
  # benches: bench/edge-bench's floor (nginx terminating TLS) and load (wrk)
  nginx-light wrk
  # the plugin SDK's ABI check (tests/abi: abidiff against the recorded ABI)
  abigail-tools
)

box_install_deps () {
  local missing=()
  local pkg
  for pkg in "${BOX_DEB_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "box: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  box_install_deps
fi
