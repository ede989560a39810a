#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running boxd:
# installs the dependencies, builds and installs box, starts boxd with its
# embedded defaults (SQLite store, key auth) and prints the API URL, where
# the admin token is, and a working project key; the edge (sandbox and port
# URLs over TLS) listens next to it, and its CA certificate's path is
# printed with how to trust it.
#
#   tools/setup.sh            listen on 127.0.0.1:7070, the edge on 127.0.0.1:7443,
#                             data in /var/lib/box
#   BOX_LISTEN=0.0.0.0:7070 BOX_EDGE_LISTEN=0.0.0.0:443 BOX_DATA_DIR=/srv/box tools/setup.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
listen="${BOX_LISTEN:-127.0.0.1:7070}"
edge_listen="${BOX_EDGE_LISTEN:-127.0.0.1:7443}"
data_dir="${BOX_DATA_DIR:-/var/lib/box}"
prefix="${BOX_PREFIX:-/usr/local}"
log="${BOX_LOG:-/var/log/boxd.log}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# shellcheck source=dev/deps.sh
. "$here/dev/deps.sh"
box_install_deps

cd "$here"
if [ ! -f build/build.ninja ]; then
  meson setup build --prefix="$prefix" --buildtype=debugoptimized >/dev/null
fi
ninja -C build >/dev/null
$sudo meson install -C build --quiet >/dev/null
$sudo ldconfig

# The admin interface lives on the system bus.  Without systemd nobody has
# started one; start it, and let boxd own its name.
$sudo install -D -m 0644 data/org.box.Admin1.conf /etc/dbus-1/system.d/org.box.Admin1.conf
# A bus that answers reloads its configuration; a socket nobody answers
# (a daemon that died) is stale and goes, with its pid file.
if $sudo dbus-send --system --type=method_call --dest=org.freedesktop.DBus / \
     org.freedesktop.DBus.ReloadConfig >/dev/null 2>&1; then
  :
else
  $sudo rm -f /run/dbus/system_bus_socket /run/dbus/pid
  $sudo mkdir -p /run/dbus
  $sudo dbus-daemon --system --fork
fi

# The sandboxes' NAT needs IPv4 forwarding.  boxd.service keeps /proc/sys
# read-only for boxd (ProtectKernelTunables), so it is turned on here, now
# and at every boot, rather than by boxd.
echo 'net.ipv4.ip_forward = 1' | $sudo tee /etc/sysctl.d/60-box.conf >/dev/null
$sudo sysctl -q -w net.ipv4.ip_forward=1

# Real sandboxes run under libvirt; start its daemons when nobody has.
$sudo "$here/dev/libvirtd-up.sh"

# The guest kernel and the base image (cached; rebuilt only when their
# recipe changes).  The first build takes a minute or two.
echo "box: building the guest kernel and base image (cached in /var/cache/box/images)" >&2
$sudo "$here/images/build-base.sh" >/dev/null

# (Re)start boxd.
if pid="$(pgrep -x boxd)"; then
  $sudo kill $pid
  while pgrep -x boxd >/dev/null; do sleep 0.1; done
fi
$sudo mkdir -p "$data_dir"
$sudo touch "$log"
$sudo sh -c "nohup '$prefix/sbin/boxd' --data-dir '$data_dir' --listen '$listen' --edge-listen '$edge_listen' >>'$log' 2>&1 &"

url="http://$listen"
for _ in $(seq 100); do
  curl -fsS -o /dev/null "$url/v1/templates" -H "Authorization: Bearer -" 2>/dev/null && break
  code="$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/templates" || true)"
  [ "$code" = "401" ] && break
  sleep 0.1
done

# A project and a key to start with.  The admin token goes through a pipe,
# never on a command line (setup-first-key.sh).
token_file="$data_dir/admin-token"
if [ -n "${BOX_ADMIN_TOKEN:-}" ]; then
  key="$(printf '%s\n' "$BOX_ADMIN_TOKEN" | "$here/tools/setup-first-key.sh" "$url")"
else
  key="$($sudo cat "$token_file" | "$here/tools/setup-first-key.sh" "$url")"
fi

cat <<TXT
boxd is running (log: $log).
  API URL:      $url
  admin token:  ${BOX_ADMIN_TOKEN:+from BOX_ADMIN_TOKEN}${BOX_ADMIN_TOKEN:-$token_file}
  project:      default
  API key:      $key
  sandbox URLs: https://<name>--default.sandbox.localhost:${edge_listen##*:}
  edge CA:      $data_dir/tls/ca.pem
    trust it system-wide (curl, Python):
      sudo cp $data_dir/tls/ca.pem /usr/local/share/ca-certificates/box-edge.crt
      sudo update-ca-certificates
    or per command: curl --cacert $data_dir/tls/ca.pem ...
    browsers keep their own store (Chromium: Settings, Privacy and security,
    Security, Manage certificates, Authorities, Import).

Try:
  export BOX_URL=$url BOX_KEY=$key
  curl -s -X POST \$BOX_URL/v1/sandboxes -H "Authorization: Bearer \$BOX_KEY" -d '{}'
TXT
