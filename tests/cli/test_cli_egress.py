#!/usr/bin/env python3
# cli-egress: `box egress SANDBOX …` against the real boxd (dummy
# hypervisor): usage errors (exit 2, nothing asked of the API), --show and
# the "unrestricted" view, edits computed from the sandbox's rules (shown
# with --dry-run, which changes nothing), the API's own refusals (400
# invalid, and 501 unsupported where rules are not enforced yet) changing
# nothing, and -- where the deployment enforces rules -- edits that PATCH
# the whole list.

import json

from clitest import Client, box, check
import boxtest
from boxtest import Boxd, Tap

t = Tap()
d = Boxd(t).start()
KEY = d.project_with_key('egress')
c = Client(d, KEY)
LONG_LABEL = 'a' * 64 + '.example'   # a DNS label is at most 63


def api_rules(name):
    r = d.request('GET', '/v1/sandboxes/' + name, token=KEY)
    return ((r[2] or {}).get('network') or {}).get('egress')


def test_usage(t):
    r = box(['--help'])
    t.ok(' egress SANDBOX' in r.out, 'box --help lists egress', r.out)
    r = box(['egress', '--help'])
    check(t, r, 0, 'box egress --help exits 0')
    for opt in ('--allow', '--deny', '--remove', '--defaults', '--no-defaults', '--clear', '--show',
                '--dry-run', '--json'):
        t.ok(opt in r.out, 'box egress --help lists %s' % opt, r.out)
    cases = [
        (['egress'], 'no sandbox', 'Missing arguments'),
        (['egress', 'a', 'b'], 'two sandboxes', 'Unexpected argument'),
        (['egress', 'a', '--allow', '10.1.2.3'], 'an IPv4 address', 'not IP addresses'),
        (['egress', 'a', '--allow', '2001:db8::1'], 'an IPv6 address', 'not IP addresses'),
        (['egress', 'a', '--allow', '[2001:db8::1]:443'], 'a bracketed IPv6 address',
         'not IP addresses'),
        (['egress', 'a', '--deny', '::1'], 'an IPv6 deny', 'not IP addresses'),
        (['egress', 'a', '--allow', '*foo.example'], '*foo', 'a wildcard is'),
        (['egress', 'a', '--allow', 'a.*.example'], 'a * inside', 'a wildcard is'),
        (['egress', 'a', '--allow', '*.'], '*. alone', 'a wildcard is'),
        (['egress', 'a', '--allow', ':443'], 'no domain', 'needs a domain'),
        (['egress', 'a', '--allow', 'x.example:'], 'a colon without ports', 'the ports'),
        (['egress', 'a', '--allow', 'x.example:0'], 'port 0', 'the ports'),
        (['egress', 'a', '--allow', 'x.example:65536'], 'port 65536', 'the ports'),
        (['egress', 'a', '--allow', 'x.example:80,,443'], 'an empty port', 'the ports'),
        (['egress', 'a', '--allow', 'x.example:80,ssh'], 'a port name', 'the ports'),
        (['egress', 'a', '--deny', 'x.example:22'], 'a deny with a port', 'takes none'),
        (['egress', 'a', '--allow', 'x.example', '--deny', 'X.example'], 'allow and deny of one',
         'named twice'),
        (['egress', 'a', '--defaults', '--no-defaults'], '--defaults --no-defaults', 'contradict'),
        (['egress', 'a', '--show', '--clear'], '--show with an edit', '--show takes no edit'),
        (['egress', 'a', '--remove', '1.2.3.4'], '--remove of an address', 'not IP addresses'),
    ]
    for args, what, want in cases:
        r = box(args)   # no BOX_URL, no key: a usage error asks nothing of the API
        check(t, r, 2, 'egress usage error (%s): exit 2' % what, out='', err_contains=want)
        t.ok(r.err.startswith('box: '), 'egress usage error (%s): "box: ..."' % what, r.err)


def test_show_and_dry_run(t):
    check(t, c('create', '--name', 'eg'), 0, 'create eg')
    for args in (['egress', 'eg'], ['egress', 'eg', '--show']):
        r = c(*args)
        check(t, r, 0, 'box %s: no rules' % ' '.join(args),
              out='unrestricted (no rules: the whole internet)\n')
    r = c('egress', 'eg', '--json')
    check(t, r, 0, 'egress --json')
    t.eq(json.loads(r.out or 'null'), {'egress': []}, '--json prints the network field')
    r = c('egress', 'ghost')
    check(t, r, 1, 'egress of an unknown sandbox: exit 1', out='', err_contains='(not_found)')

    edit = ['--allow', 'API.example.com', '--allow', '*.github.com:443,22,443',
            '--deny', 'evil.example.com', '--defaults', '--allow', '*']
    r = c('egress', 'eg', '--dry-run', *edit)
    check(t, r, 0, 'egress --dry-run with an edit')
    t.eq([ln.split() for ln in r.out.splitlines()],
         [['DOMAIN', 'ACTION', 'PORTS'],
          ['(defaults)', 'include', '80,443'],
          ['evil.example.com', 'deny', 'all'],
          ['api.example.com', 'allow', '80,443'],
          ['*.github.com', 'allow', '443,22'],
          ['*', 'allow', '80,443']],
         'the new rules: defaults, then denies, then allows; lowercased, ports once')
    r = c('egress', 'eg', '-n', '--json', *edit)
    check(t, r, 0, 'egress -n --json with an edit')
    t.eq(json.loads(r.out or 'null'),
         {'egress': [{'include': 'defaults'},
                     {'domain': 'evil.example.com', 'action': 'deny'},
                     {'domain': 'api.example.com', 'action': 'allow'},
                     {'domain': '*.github.com', 'action': 'allow', 'ports': [443, 22]},
                     {'domain': '*', 'action': 'allow'}]},
         '--json: the body the PATCH would send')
    t.eq(api_rules('eg'), [], 'a dry run changed nothing')

    r = c('egress', 'eg', '--remove', 'nothing.example')
    check(t, r, 1, '--remove of a domain without rules: exit 1', out='',
          err_contains='no rule for “nothing.example”; nothing was changed')
    r = c('egress', 'eg', '--clear')
    check(t, r, 0, '--clear of an unrestricted sandbox',
          out='unrestricted (no rules: the whole internet)\n')
    t.eq(api_rules('eg'), [], '... which stays unrestricted')


def test_api_refusals(t):
    # the API's own checks (400 invalid) come before anything is stored
    r = c('egress', 'eg', '--allow', LONG_LABEL)
    check(t, r, 1, 'a name the API refuses: exit 1', out='', err_contains='(invalid)')
    t.ok(LONG_LABEL in r.err, '... naming the domain', r.err)
    many = []
    for i in range(1001):
        many += ['--allow', 'h%d.example.com' % i]
    r = c('egress', 'eg', *many)
    check(t, r, 1, '1001 rules: exit 1', out='', err_contains='1001 counting defaults expanded')
    defaults = d.request('GET', '/v1/network/defaults', token=KEY)[2]['egress']
    r = c('egress', 'eg', '--defaults', *many[:2 * (1001 - len(defaults))])
    check(t, r, 1, '--defaults plus %d rules is 1001: exit 1' % (1001 - len(defaults)),
          err_contains='1001 counting defaults expanded')
    t.eq(api_rules('eg'), [], 'a refused edit changed nothing')


def test_edits(t):
    r = c('egress', 'eg', '--allow', 'API.example.com')
    if r.rc == 1 and '(unsupported)' in r.err:
        # this deployment does not enforce rules yet (the engine's 501)
        check(t, r, 1, 'rules where nothing enforces them: exit 1 (unsupported)', out='')
        t.eq(api_rules('eg'), [], '... and nothing was stored')
        t.skip('edits of stored rules', 'the deployment answers 501 for non-empty rules')
        return
    check(t, r, 0, '--allow API.example.com', out=None)
    t.eq(api_rules('eg'), [{'domain': 'api.example.com', 'action': 'allow', 'ports': [80, 443]}],
         'the API holds the rule, lowercased')
    check(t, c('egress', 'eg', '--allow', '*.github.com:443,22', '--deny', 'evil.example',
               '--defaults'), 0, 'more rules')
    check(t, c('egress', 'eg', '--allow', 'api.example.com:8443'), 0,
          'an allow of a domain with a rule replaces it')
    check(t, c('egress', 'eg', '--deny', '*.github.com'), 0,
          'a deny of a domain with an allow replaces it')
    t.eq(api_rules('eg'),
         [{'domain': 'api.example.com', 'action': 'allow', 'ports': [8443]},
          {'domain': '*.github.com', 'action': 'deny'},
          {'domain': 'evil.example', 'action': 'deny'},
          {'include': 'defaults'}],
         'each domain once, in place')
    r = c('egress', 'eg')
    check(t, r, 0, 'egress shows the rules')
    t.eq(r.out.splitlines()[1].split(), ['api.example.com', 'allow', '8443'], 'the first row')
    check(t, c('egress', 'eg', '--remove', 'evil.example', '--no-defaults'), 0,
          '--remove and --no-defaults')
    t.eq([x.get('domain') for x in api_rules('eg')], ['api.example.com', '*.github.com'],
         'the removed rules are gone')
    r = c('egress', 'eg', '--clear')
    check(t, r, 0, '--clear', out='unrestricted (no rules: the whole internet)\n')
    t.eq(api_rules('eg'), [], 'no rules: the whole internet')


boxtest.main(t, test_usage, test_show_and_dry_run, test_api_refusals, test_edits)
