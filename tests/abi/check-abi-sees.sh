#!/bin/sh
# The ABI check can fail where it matters: check-abi.sh run against a
# baseline doctored so that one vfunc of each interface's vtable
# (BoxHypervisorInterface, BoxStorageInterface, ...: reachable from no SDK
# function) sits at another offset must report an ABI change.
#
#   check-abi-sees.sh CHECK_ABI LIBRARY HEADERS_DIR ABI_VERSION BASELINE_DIR
set -u
check=$1 lib=$2 headers=$3 abi=$4 dir=$5
baseline="$dir/libbox-plugin-$abi.abi"

if ! command -v abidiff >/dev/null 2>&1; then
  echo "1..0 # SKIP abidiff is not installed"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ifaces="Hypervisor Storage Network Auth Broker Agent"
echo "1..$(echo $ifaces | wc -w)"
n=0
for iface in $ifaces; do
  n=$((n + 1))
  # the first vfunc after g_iface (offset 128) moves to 2048
  sed "/<class-decl name='_Box${iface}Interface'/,/<\/class-decl>/ s/layout-offset-in-bits='128'/layout-offset-in-bits='2048'/" \
    "$baseline" >"$tmp/libbox-plugin-$abi.abi"
  if cmp -s "$baseline" "$tmp/libbox-plugin-$abi.abi"; then
    echo "not ok $n - Box${iface}Interface is not in the baseline (abidw --load-all-types?)"
  elif sh "$check" "$lib" "$headers" "$abi" "$tmp" | grep -q "^not ok.*ABI"; then
    echo "ok $n - a moved vfunc of Box${iface}Interface fails the check"
  else
    echo "not ok $n - a moved vfunc of Box${iface}Interface passes the check"
  fi
done
