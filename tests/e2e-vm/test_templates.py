#!/usr/bin/env python3
# vm: template snapshots of earlier inputs are pruned at start.
#
# An image rebuild (or a QEMU upgrade) makes boxd build a new template
# snapshot; the old one (~150 MiB of RAM file and disk) must go once
# nothing needs it, and never while something does.  Next to the real
# template this plants, in the suite's vm_dir, snapshots of an image that
# does not exist:
#   unused   nothing refers to it                      -> removed at start
#   backed   a disk under vms/ is an overlay on it     -> kept
#   held     another process holds it (shared flock,   -> kept
#            as every boxd does on the templates it uses)
# then restarts boxd once the disk and the lock are gone: both go.  The
# real template is kept throughout and a sandbox is created from it.

import fcntl
import json
import os
import shutil
import subprocess
import secrets

import vmtest
from vmtest import VmBoxd, Tap, VM_DIR

t = Tap()
vmtest.prepare(t)
TEMPLATES = os.path.join(VM_DIR, 'templates')
VMS = os.path.join(VM_DIR, 'vms')


def plant(image):
    """A finished-looking template snapshot of @image; returns its dir."""
    key = secrets.token_hex(8)
    path = os.path.join(TEMPLATES, key)
    os.makedirs(path)
    with open(os.path.join(path, 'manifest.json'), 'w') as f:
        json.dump({'key': key, 'image': image, 'accel': 'tcg', 'qemu': '0.0.0', 'cpus': 2,
                   'memory_mib': 2048, 'nic': True, 'recipe': 'box-libvirt-3'}, f)
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', os.path.join(path, 'disk.qcow2'), '64M'],
                   check=True)
    with open(os.path.join(path, 'ram'), 'wb') as f:
        f.truncate(64 << 20)
    return path


image = 'e2e-gone-' + secrets.token_hex(4)
unused, backed, held = plant(image), plant(image), plant(image)
vm_dir = os.path.join(VMS, 'e2etpl' + secrets.token_hex(3))
os.makedirs(vm_dir)
subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b',
                os.path.join(backed, 'disk.qcow2'), os.path.join(vm_dir, 'disk.qcow2')], check=True)
lock = open(os.path.join(held, 'manifest.json'))
fcntl.flock(lock, fcntl.LOCK_SH)


def image_of(key):
    try:
        with open(os.path.join(TEMPLATES, key, 'manifest.json')) as f:
            return json.load(f).get('image')
    except (OSError, ValueError):
        return None


with open(os.path.join(vmtest.IMAGE_CACHE, 'base', 'manifest.json')) as f:
    IMAGE_KEY = json.load(f)['image_key']
# the current image's snapshots (other sizes too); earlier images' may
# be pruned here as well, as they are on a host after an upgrade
real = [k for k in os.listdir(TEMPLATES) if '.' not in k and image_of(k) == IMAGE_KEY]

d = VmBoxd(t)
try:
    vmtest.setup_or_bail(d, d.start)
    KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
    t.ok(not os.path.exists(unused), 'a snapshot of an earlier image that nothing uses is removed at start',
         os.listdir(unused) if os.path.exists(unused) else None)
    t.ok(d.log_lines('removed the template snapshot %s of image %s' % (os.path.basename(unused), image)),
         'boxd says so in its log')
    t.ok(os.path.exists(os.path.join(backed, 'disk.qcow2')) and os.path.exists(os.path.join(backed, 'ram')),
         'one that a disk under vms/ backs onto is kept whole')
    t.ok(os.path.exists(os.path.join(held, 'manifest.json')),
         'one that another process holds (shared flock) is kept')
    t.ok(all(os.path.exists(os.path.join(TEMPLATES, k, 'manifest.json')) for k in real),
         'the snapshots of the current image are kept', real)
    st, _h, sb, raw = d.request('POST', '/v1/sandboxes', {}, token=KEY, timeout=300)
    t.status((st, _h, sb, raw), 201, 'a create still forks the current template')
    if st == 201:
        d.request('DELETE', '/v1/sandboxes/' + sb['id'], token=KEY, timeout=120)

    # boxd holds its own templates: a pruner (another boxd on this vm_dir)
    # cannot take the exclusive lock of the one in use
    current = [k for k in real if os.path.exists(os.path.join(TEMPLATES, k, 'manifest.json'))]
    blocked = []
    for k in current:
        with open(os.path.join(TEMPLATES, k, 'manifest.json')) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            except BlockingIOError:
                blocked.append(k)
    t.ok(len(blocked) >= 1, 'the running boxd holds the template it uses (no exclusive lock for others)',
         {'current': current, 'blocked': blocked})

    shutil.rmtree(vm_dir)
    lock.close()
    d.stop('boxd stops (first run)')
    vmtest.setup_or_bail(d, d.start)
    t.ok(not os.path.exists(backed), 'once no disk backs onto it, the next start removes it')
    t.ok(not os.path.exists(held), 'once nobody holds it, the next start removes it')
    t.ok(all(os.path.exists(os.path.join(TEMPLATES, k, 'manifest.json')) for k in real),
         'the current ones are still there', real)
    d.stop('boxd stops (second run)')
finally:
    for p in (unused, backed, held, vm_dir):
        shutil.rmtree(p, ignore_errors=True)
t.finish()
