#!/bin/bash
# Build the `base` template image: a Debian bookworm root filesystem made with
# mmdebstrap, the box guest agent, an ext4 disk image and a tiny initramfs.
#
# Output (keyed by a hash of the recipe, rebuilt only when it changes):
#   $BOX_IMAGE_CACHE/rootfs-<key1>/          mmdebstrap tree (key: scripts + package list)
#   $BOX_IMAGE_CACHE/base-<key2>/rootfs.ext4 sparse ext4 image (key: key1 + agent source + kernel)
#   $BOX_IMAGE_CACHE/base-<key2>/initrd.img  cpio newc: /init = box-agent, virtio modules
#   $BOX_IMAGE_CACHE/base-<key2>/vmlinuz     the kernel it was made for (hard link or copy)
#   $BOX_IMAGE_CACHE/base-<key2>/manifest.json
#   $BOX_IMAGE_CACHE/base -> base-<key2>
# Prints the image directory on stdout, build times on stderr.
#
# Usage: images/build-base.sh [--force] [--size-mib N]   (default size 2048 MiB)
# Env:   BOX_IMAGE_CACHE (default /var/cache/box/images), BOX_MIRROR (optional)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
CACHE=${BOX_IMAGE_CACHE:-/var/cache/box/images}
SIZE_MIB=2048
FORCE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --force) FORCE=1 ;;
        --size-mib) SIZE_MIB=$2; shift ;;
        *) echo "usage: $0 [--force] [--size-mib N]" >&2; exit 2 ;;
    esac
    shift
done
log() { echo "build-base: $*" >&2; }
now() { date +%s.%N; }
secs() { printf '%.2f' "$(echo "$2 - $1" | bc)"; }

mkdir -p "$CACHE"
# One build at a time per cache (set-up, tests and a user may overlap).
exec 8>"$CACHE/.build-base.lock"
flock 8
T0=$(now)

# 1. kernel (its modules go into the initramfs)
KDIR=$("$HERE/build-kernel.sh")
T1=$(now)

# 2. root filesystem tree
PKGS=$(grep -v '^#' "$HERE/base.packages" | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
MMDEBSTRAP_ARGS=(--variant=apt --include="$PKGS"
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/share/info/*')
KEY1=$( { cat "$HERE/base-customize.sh"; echo "${MMDEBSTRAP_ARGS[*]}"; \
          echo "${BOX_MIRROR:-}"; } | sha256sum | cut -c1-16)
ROOTFS="$CACHE/rootfs-$KEY1"
if [ $FORCE = 1 ] || [ ! -f "$ROOTFS/.done" ]; then
    rm -rf "$ROOTFS" "$ROOTFS.tmp"
    log "mmdebstrap bookworm -> $ROOTFS"
    mmdebstrap "${MMDEBSTRAP_ARGS[@]}" \
        --customize-hook="sh '$HERE/base-customize.sh' \"\$1\"" \
        bookworm "$ROOTFS.tmp" ${BOX_MIRROR:-} >"$CACHE/mmdebstrap.log" 2>&1 || {
            tail -n 30 "$CACHE/mmdebstrap.log" >&2; exit 1; }
    mv "$ROOTFS.tmp" "$ROOTFS"
    touch "$ROOTFS/.done"
else
    log "cached rootfs: $ROOTFS"
fi
T2=$(now)

# 3. the agent (static)
ABUILD=$(mktemp -d "$CACHE/.agent-build.XXXXXX")
trap 'rm -rf "$ABUILD"' EXIT
make -s -C "$SRC/agent" O="$ABUILD" >&2
AGENT="$ABUILD/box-agent"
T3=$(now)

# 4. disk image + initramfs
KEY2=$( { echo "$KEY1"; basename "$(readlink -f "$KDIR")"; echo "$SIZE_MIB"; \
          cat "$HERE/mkcpio.py"; sha256sum < "$AGENT"; } | sha256sum | cut -c1-16)
OUT="$CACHE/base-$KEY2"
if [ $FORCE = 0 ] && [ -f "$OUT/.done" ]; then
    ln -sfn "base-$KEY2" "$CACHE/base"
    log "cached image: $OUT"
    echo "$OUT"
    exit 0
fi
rm -rf "$OUT.tmp"; mkdir -p "$OUT.tmp"

install -D -m 0755 "$AGENT" "$ROOTFS/usr/lib/box/box-agent"
ln -sfn /usr/lib/box/box-agent "$ROOTFS/sbin/box-agent"
rm -f "$ROOTFS/.done"
truncate -s "${SIZE_MIB}M" "$OUT.tmp/rootfs.ext4"
mkfs.ext4 -q -F -L box-root -E root_owner=0:0 -d "$ROOTFS" "$OUT.tmp/rootfs.ext4" "${SIZE_MIB}M"
touch "$ROOTFS/.done"
T4=$(now)

entries=("dir:/dev:0755" "dir:/proc:0755" "dir:/sys:0755" "dir:/newroot:0755"
         "dir:/lib:0755" "dir:/lib/box:0755" "dir:/lib/box/modules:0755"
         "file:/init:0755:$AGENT")
for f in "$KDIR"/modules/*; do
    entries+=("file:/lib/box/modules/$(basename "$f"):0644:$f")
done
python3 "$HERE/mkcpio.py" "$OUT.tmp/initrd.img" "${entries[@]}"
ln "$KDIR/vmlinuz" "$OUT.tmp/vmlinuz" 2>/dev/null || cp "$KDIR/vmlinuz" "$OUT.tmp/vmlinuz"
used=$(du -sm "$OUT.tmp/rootfs.ext4" | cut -f1)
cat > "$OUT.tmp/manifest.json" <<EOF
{"name": "base", "kernel": "$(cat "$KDIR/package")", "rootfs_key": "$KEY1",
 "image_key": "$KEY2", "size_mib": $SIZE_MIB, "allocated_mib": $used,
 "resources": {"cpus": 2, "memory_mib": 2048, "disk_gib": 20}}
EOF
touch "$OUT.tmp/.done"
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
ln -sfn "base-$KEY2" "$CACHE/base"
T5=$(now)
log "image $OUT: rootfs.ext4 ${SIZE_MIB} MiB (${used} MiB allocated), initrd $(du -k "$OUT/initrd.img" | cut -f1) KiB"
log "times: kernel $(secs "$T0" "$T1")s, mmdebstrap $(secs "$T1" "$T2")s, agent $(secs "$T2" "$T3")s, mkfs $(secs "$T3" "$T4")s, initrd $(secs "$T4" "$T5")s, total $(secs "$T0" "$T5")s"
echo "$OUT"
