#!/bin/bash
# Build (fetch + extract) the guest kernel for box sandboxes.
#
# Downloads Debian's versioned linux-image-*-cloud-amd64 package (the dependency
# of the linux-image-cloud-amd64 meta package) with `apt-get download`, extracts
# it with dpkg-deb -x into the image cache (never installs it on the host) and
# outputs:
#   $BOX_IMAGE_CACHE/kernel-<key>/vmlinuz
#   $BOX_IMAGE_CACHE/kernel-<key>/modules/<name>.ko   (virtio & co., flat)
#   $BOX_IMAGE_CACHE/kernel-<key>/modules/modules.load (load order, deps first)
#   $BOX_IMAGE_CACHE/kernel-<key>/version
#   $BOX_IMAGE_CACHE/kernel -> kernel-<key>            (symlink to the newest)
# The key hashes this script and the resolved package version, so the kernel is
# re-extracted only when either changes. Prints the kernel directory on stdout.
#
# Usage: images/build-kernel.sh [--force]
# Env:   BOX_IMAGE_CACHE (default /var/cache/box/images)
#        BOX_KERNEL_PACKAGE (default: resolved from linux-image-cloud-amd64)
set -euo pipefail

CACHE=${BOX_IMAGE_CACHE:-/var/cache/box/images}
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
log() { echo "build-kernel: $*" >&2; }

# Modules the guest needs at boot. Whatever is built in (=y) is skipped, and
# each module's own dependencies (its .modinfo "depends=") are added first.
WANTED="virtio virtio_pci virtio_mmio virtio_blk virtio_net virtio_console virtio_rng virtio_balloon"

t0=$(date +%s.%N)
mkdir -p "$CACHE"

pkg=${BOX_KERNEL_PACKAGE:-}
if [ -z "$pkg" ]; then
    pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
          sed -n 's/^ *Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -n1)
    if [ -z "$pkg" ]; then
        log "cannot resolve linux-image-cloud-amd64 (run apt-get update?)"
        exit 1
    fi
fi
ver=$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p')
key=$( { cat "$0"; echo "$pkg=$ver"; echo "$WANTED"; } | sha256sum | cut -c1-16)
out="$CACHE/kernel-$key"

if [ $FORCE = 0 ] && [ -f "$out/.done" ]; then
    ln -sfn "kernel-$key" "$CACHE/kernel"
    log "cached: $out ($pkg $ver)"
    echo "$out"
    exit 0
fi

tmp=$(mktemp -d "$CACHE/.kernel-tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "$pkg=$ver" >/dev/null 2>"$tmp/download.log") || {
    cat "$tmp/download.log" >&2; exit 1; }
t1=$(date +%s.%N)
dpkg-deb -x "$tmp"/*.deb "$tmp/x"
kver=$(ls "$tmp/x/lib/modules")
config="$tmp/x/boot/config-$kver"
moddir="$tmp/x/lib/modules/$kver"

mkdir -p "$tmp/out/modules"
cp "$tmp/x/boot/vmlinuz-$kver" "$tmp/out/vmlinuz"
cp "$config" "$tmp/out/config"
echo "$kver" > "$tmp/out/version"
echo "$pkg=$ver" > "$tmp/out/package"

# name -> path of the .ko (names use _ ; files may use - )
find "$moddir/kernel" -name '*.ko*' > "$tmp/all-modules"
ko_path() {
    local n=$1 alt=${1//_/-}
    grep -E "/($n|$alt)\.ko(\.(xz|zst|gz))?$" "$tmp/all-modules" | head -n1
}
ko_deps() {
    local f=$1
    case "$f" in
        *.xz) xz -dc "$f" ;; *.zst) zstd -dc "$f" ;; *.gz) gzip -dc "$f" ;; *) cat "$f" ;;
    esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '
}

declare -A seen=()
order=()
add_module() {
    local n=$1 f d
    [ -n "${seen[$n]:-}" ] && return 0
    seen[$n]=1
    f=$(ko_path "$n")
    if [ -z "$f" ]; then
        if grep -qE "/($n|${n//_/-})\.ko" "$moddir/modules.builtin" 2>/dev/null; then
            log "$n is built in"
        else
            log "warning: module $n not found"
        fi
        return 0
    fi
    for d in $(ko_deps "$f"); do add_module "$d"; done
    case "$f" in
        *.xz) xz -dc "$f" > "$tmp/out/modules/$n.ko" ;;
        *.zst) zstd -qdc "$f" > "$tmp/out/modules/$n.ko" ;;
        *.gz) gzip -dc "$f" > "$tmp/out/modules/$n.ko" ;;
        *) cp "$f" "$tmp/out/modules/$n.ko" ;;
    esac
    order+=("$n")
}
for m in $WANTED; do add_module "$m"; done
printf '%s\n' "${order[@]}" > "$tmp/out/modules/modules.load"

# Report what is built in that matters for the guest.
grep -E '^CONFIG_(EXT4_FS|VIRTIO_PCI|VIRTIO_BLK|VIRTIO_NET|VIRTIO_CONSOLE|DEVTMPFS|UNIX|PACKET|HW_RANDOM_VIRTIO)=' \
    "$config" | tr '\n' ' ' >&2; echo >&2

touch "$tmp/out/.done"
rm -rf "$out"
mv "$tmp/out" "$out"
ln -sfn "kernel-$key" "$CACHE/kernel"
t2=$(date +%s.%N)
log "$pkg $ver -> $out (modules: ${order[*]})"
log "$(printf 'download %.2fs, extract+select %.2fs, total %.2fs' \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$(echo "$t2 - $t0" | bc)")"
echo "$out"
