#!/bin/sh
# mmdebstrap customize hook for the `base` template. $1 = the root filesystem.
# Runs on the host (not chrooted): it only edits files.
set -eu
R=$1

# user box (uid 1000), passwordless sudo; root has no password (locked)
grep -q '^box:' "$R/etc/passwd" || {
    echo 'box:x:1000:1000:box:/home/box:/bin/bash' >> "$R/etc/passwd"
    echo 'box:x:1000:' >> "$R/etc/group"
    echo 'box:!:19000:0:99999:7:::' >> "$R/etc/shadow"
}
mkdir -p "$R/home/box"
cp -a "$R/etc/skel/." "$R/home/box/" 2>/dev/null || true
chown -R 1000:1000 "$R/home/box"
chmod 0755 "$R/home/box"
sed -i 's/^\(sudo:.*:\)$/\1box/' "$R/etc/group"
echo 'box ALL=(ALL:ALL) NOPASSWD: ALL' > "$R/etc/sudoers.d/box"
chmod 0440 "$R/etc/sudoers.d/box"

# image environment (the agent reads /etc/environment as the lowest env layer)
cat > "$R/etc/environment" <<'EOF'
DEBIAN_FRONTEND=noninteractive
LANG=C.UTF-8
EOF

# filled in at boot by the agent
: > "$R/etc/hostname"
cat > "$R/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1		localhost ip6-localhost ip6-loopback
EOF
rm -f "$R/etc/resolv.conf"
: > "$R/etc/resolv.conf"

mkdir -p "$R/var/lib/box/services" "$R/var/lib/box/hooks/presuspend.d" "$R/run/box"
chmod 1777 "$R/tmp"

# nothing cached in the image
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R"/var/cache/apt/archives/*.deb \
       "$R"/var/cache/debconf/*-old "$R"/var/log/*.log "$R"/var/log/apt/* \
       "$R"/root/.npm "$R"/root/.cache
