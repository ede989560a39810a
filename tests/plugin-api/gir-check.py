#!/usr/bin/env python3
"""The SDK's introspection data is usable (TAP): Box-1.typelib loads with
python3-gi, the records are boxed types with their fields (and their
element types: a GHashTable or GPtrArray member without one crashes
pygobject), the interfaces show their virtual methods, the enums and flags
are registered GTypes, and BOX_ERROR is the error domain of BoxErrorCode.

usage: gir-check.py BUILD_DIR_OF_THE_SDK   (Box-1.gir, Box-1.typelib and
                                            libbox-plugin-1.so live there)
       gir-check.py --docs-off             (exits 77: skipped)

Run it with a Python that has python3-gi (Debian: /usr/bin/python3).
"""
import os
import sys
import xml.etree.ElementTree as ET

if len(sys.argv) != 2:
    sys.exit(__doc__)
if sys.argv[1] == '--docs-off':
    print('1..0 # SKIP built without -Ddocs: no introspection data')
    sys.exit(77)

sdk_dir = os.path.abspath(sys.argv[1])
gir_path = os.path.join(sdk_dir, 'Box-1.gir')

n = 0
failures = 0


def ok(cond, what, detail=''):
    global n, failures
    n += 1
    print('%s %d - %s' % ('ok' if cond else 'not ok', n, what))
    if not cond:
        failures += 1
        for line in str(detail).strip().splitlines():
            print('# ' + line)
    return cond


def check(what, fn):
    """ok() on fn() returning True; an exception is a failure with its text"""
    try:
        result = fn()
    except Exception as e:   # noqa: BLE001 - every failure is a test failure
        return ok(False, what, '%s: %s' % (type(e).__name__, e))
    return ok(result is True, what, 'got %r' % (result,))


try:
    import gi
except ImportError:
    print('Bail out! python3-gi is missing (Debian: apt-get install python3-gi)')
    sys.exit(1)

os.environ['GI_TYPELIB_PATH'] = sdk_dir + os.pathsep + os.environ.get('GI_TYPELIB_PATH', '')
os.environ['LD_LIBRARY_PATH'] = sdk_dir + os.pathsep + os.environ.get('LD_LIBRARY_PATH', '')
# The typelib names libbox-plugin-1.so.1; GIRepository looks for it with
# dlopen(), which reads LD_LIBRARY_PATH only at start-up: prepend the
# folder to GIRepository's own search path as well.
gi.require_version('GIRepository', '2.0')
from gi.repository import GIRepository  # noqa: E402

GIRepository.Repository.prepend_search_path(sdk_dir)
GIRepository.Repository.prepend_library_path(sdk_dir)

try:
    gi.require_version('Box', '1')
    from gi.repository import Box  # noqa: E402
except Exception as e:   # noqa: BLE001
    print('Bail out! Box-1 does not load: %s' % e)
    sys.exit(1)
gi.require_version('Json', '1.0')
from gi.repository import GLib, GObject, Json  # noqa: E402

ok(True, 'Box-1.typelib loads')

# ---- Records: boxed types with their fields -------------------------------

RECORDS = {
    'Project': ['name', 'domains', 'created_at', 'revision'],
    'Key': ['id', 'name', 'project', 'hash'],
    'Principal': ['kind', 'project', 'key', 'sandbox_id'],
    'Rule': ['domain', 'allow', 'ports', 'n_ports', 'include'],
    'Resources': ['cpus', 'memory_mib', 'disk_gib'],
    'Sandbox': ['id', 'name', 'state', 'resources', 'env', 'labels', 'egress', 'secrets',
                'port_access', 'revision'],
    'Checkpoint': ['id', 'sandbox', 'memory', 'auto_'],
    'Secret': ['name', 'hosts', 'sealed_value'],
    'Template': ['name', 'image', 'resources'],
    'Event': ['type', 'project', 'sandbox', 'at', 'detail'],
    'SandboxCreate': ['name', 'env', 'egress', 'from_checkpoint'],
    'SandboxUpdate': ['env', 'deadline_set', 'secrets'],
    'SecretPut': ['value', 'hosts', 'placeholder_prefix'],
    'ExecRequest': ['argv', 'env', 'stdin_data', 'timeout_s'],
    'ExecResult': ['exit_code', 'stdout_data', 'stderr_data'],
    'NetAttachment': ['ifname', 'mac', 'address', 'dns'],
    'BrokeredSecret': ['secret', 'value'],
    'HypervisorCapabilities': ['flags', 'accel'],
    'VmRequest': ['sandbox_id', 'resources', 'env', 'egress', 'checkpoint_id'],
    'StorageRecord': ['kind', 'scope', 'id', 'name', 'lookup', 'body', 'revision'],
    'StorageOp': ['type', 'record'],
    'PluginInfo': ['abi_version', 'name', 'get_type', 'priority', 'flags', 'probe'],
}

for name, fields in RECORDS.items():
    def record_ok(name=name, fields=fields):
        cls = getattr(Box, name)
        info = cls.__info__
        gtype = info.get_g_type()
        if not GObject.type_is_a(gtype, GObject.TYPE_BOXED):
            return 'not boxed: %s' % gtype
        if gtype.name != 'Box' + name:
            return 'GType named %s' % gtype.name
        have = [f.get_name() for f in info.get_fields()]
        missing = [f for f in fields if f not in have]
        return True if not missing else 'fields missing: %s (has %s)' % (missing, have)
    check('Box.%s is a boxed type with its fields' % name, record_ok)


def sandbox_defaults():
    sb = Box.Sandbox.new()
    copy = sb.copy()
    got = (copy.state, copy.idle_timeout_s, copy.http_port, copy.env, copy.labels,
           list(copy.egress), list(copy.secrets), copy.template_name)
    want = (Box.SandboxState.CREATING, 300, 8080, {}, {}, [], [], '')
    return True if got == want else 'got %r' % (got,)


check('box_sandbox_new() and its copy read through introspection (maps, arrays)',
      sandbox_defaults)


def storage_record():
    rec = Box.StorageRecord.new('sandbox', None, 'sb-abc', '{"a":1}')
    boxed = GObject.Value(Box.StorageRecord, rec).get_boxed()   # g_boxed_copy
    got = (boxed.kind, boxed.scope, boxed.id, boxed.name, boxed.body, boxed.revision)
    want = ('sandbox', '', 'sb-abc', None, '{"a":1}', 0)
    return True if got == want else 'got %r' % (got,)


check('a BoxStorageRecord goes through a GValue (g_boxed_copy)', storage_record)


def rules():
    node = Json.from_string('[{"domain": "example.com", "allow": true, "ports": [443, 8443]},'
                            ' {"include": "defaults"}]')
    got = [(r.domain, r.allow, list(r.ports or []), r.include)
           for r in Box.rules_from_storage_json(node)]
    want = [('example.com', True, [443, 8443], None), (None, False, [], 'defaults')]
    return True if got == want else 'got %r' % (got,)


check('box_rules_from_storage_json() returns BoxRules with their port arrays', rules)


def project_roundtrip():
    parsed, usec = Box.time_parse('2026-11-22T00:58:55Z')
    project = Box.project_from_storage_json(
        '{"name": "p1", "domains": ["a.example"], "created_at": %d}' % usec)
    got = (project.name, list(project.domains), Box.time_format(project.created_at))
    want = ('p1', ['a.example'], '2026-11-22T00:58:55Z')
    got = (parsed,) + got
    want = (True,) + want
    return True if got == want else 'got %r' % (got,)


check('box_project_from_storage_json() returns a BoxProject', project_roundtrip)

# ---- Interfaces and the plugin class: their virtual methods ----------------

VFUNCS = {
    'Hypervisor': ['get_accel', 'list_templates', 'check_room', 'run_async', 'run_finish',
                   'get_agent', 'query', 'get_capabilities'],
    'Storage': ['write', 'get', 'list', 'write_async', 'write_finish', 'get_async',
                'get_finish', 'list_async', 'list_finish'],
    'Network': ['attach', 'rebind', 'detach', 'set_egress'],
    'Auth': ['authenticate', 'create_key', 'list_keys', 'delete_key'],
    'Broker': ['get_ca_pem', 'set_secrets'],
    'Agent': ['connect_async', 'connect_finish', 'call_async', 'call_finish',
              'exec_run_async', 'exec_run_finish', 'is_closed', 'close'],
    'Plugin': ['start', 'stop', 'add_status'],
}

for name, vfuncs in VFUNCS.items():
    def vfuncs_ok(name=name, vfuncs=vfuncs):
        have = [v.get_name() for v in getattr(Box, name).__info__.get_vfuncs()]
        missing = [v for v in vfuncs if v not in have]
        return True if not missing else 'missing: %s (has %s)' % (missing, have)
    check('Box.%s shows its virtual methods' % name, vfuncs_ok)


def list_element_type():
    ret = Box.Storage.__info__.find_method('list').get_return_type()
    elem = ret.get_param_type(0).get_interface()
    return True if elem is not None and elem.get_name() == 'StorageRecord' else 'got %r' % elem


check('box_storage_list() returns a GPtrArray of BoxStorageRecord', list_element_type)


def get_agent_type():
    vfunc = Box.Hypervisor.__info__.find_vfunc('get_agent')
    iface = vfunc.get_return_type().get_interface()
    return True if iface is not None and iface.get_name() == 'Agent' else 'got %r' % iface


check('BoxHypervisorInterface.get_agent returns a BoxAgent', get_agent_type)

# ---- Enums, flags and the error domain -------------------------------------

ENUMS = ['PrincipalKind', 'SandboxState', 'IdleAction', 'DeadlineAction', 'VmOp', 'VmState',
         'StorageOpType', 'StorageIndex', 'StorageOrder', 'ErrorCode']
FLAGS = ['HypervisorCaps', 'PluginFlags']

for name in ENUMS + FLAGS:
    def enum_ok(name=name):
        gtype = getattr(Box, name).__gtype__
        fundamental = GObject.TYPE_FLAGS if name in FLAGS else GObject.TYPE_ENUM
        if not GObject.type_is_a(gtype, fundamental):
            return '%s is not a %s' % (gtype, fundamental)
        return True if gtype.name == 'Box' + name else 'GType named %s' % gtype.name
    check('Box.%s is a registered %s type' % (name, 'flags' if name in FLAGS else 'enum'),
          enum_ok)

check('enum values and their names',
      lambda: (Box.sandbox_state_to_string(Box.SandboxState.PAUSED) == 'paused'
               and Box.sandbox_state_from_string('stopped') == (True, Box.SandboxState.STOPPED)
               and int(Box.HypervisorCaps.FORK) == 1 << 3))
check('BOX_ERROR is the quark box-error-quark',
      lambda: GLib.quark_to_string(Box.error_quark()) == 'box-error-quark')
check('BoxErrorCode has the spec codes',
      lambda: (int(Box.ErrorCode.NOT_FOUND), int(Box.ErrorCode.INTERNAL),
               Box.error_code_name(Box.ErrorCode.CONFLICT)) == (3, 11, 'conflict'))

# ---- The GIR itself ---------------------------------------------------------

ns = {'c': 'http://www.gtk.org/introspection/core/1.0',
      'glib': 'http://www.gtk.org/introspection/glib/1.0',
      'cc': 'http://www.gtk.org/introspection/c/1.0'}
root = ET.parse(gir_path).getroot()
namespace = root.find('c:namespace', ns)
error_enum = [e for e in namespace.findall('c:enumeration', ns)
              if e.get('{%s}error-domain' % ns['glib']) == 'box-error-quark']
ok(len(error_enum) == 1 and error_enum[0].get('name') == 'ErrorCode',
   'the GIR names BoxErrorCode as the error domain box-error-quark',
   [e.get('name') for e in error_enum])

# What may stay out of introspection: variadic functions, macros, and the
# agent-factory pointer property.
ALLOWED_HIDDEN = {'box_plugin_context_log', 'agent-factory'}
hidden = []
for el in namespace.iter():
    if el.get('introspectable') != '0':
        continue
    tag = el.tag.split('}')[1]
    ident = el.get('{%s}identifier' % ns['cc']) or el.get('name')
    if tag == 'function-macro' or ident in ALLOWED_HIDDEN:
        continue
    hidden.append('%s %s' % (tag, ident))
ok(not hidden, 'nothing else is left out of introspection', '\n'.join(hidden))

unboxed = [r.get('name') for r in namespace.findall('c:record', ns)
           if r.get('{%s}get-type' % ns['glib']) is None
           and r.get('{%s}is-gtype-struct-for' % ns['glib']) is None
           and r.get('disguised') != '1'
           and not r.get('name').endswith('Private')]
ok(not unboxed, 'every public record of the GIR has a GType', ', '.join(unboxed))

print('1..%d' % n)
sys.exit(1 if failures else 0)
