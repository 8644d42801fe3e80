#!/usr/bin/env python3
"""Runs Debian's Chromium, sandbox on, as uid 1000 under a seccomp profile, without Docker: the
check that ops/seccomp/chromium.json still lets Chromium build its sandbox after an edit.

    sudo apt-get install python3-seccomp
    sudo /usr/bin/python3 ops/seccomp/try-chromium.py ops/seccomp/chromium.json
    sudo /usr/bin/python3 ops/seccomp/try-chromium.py ops/seccomp/chromium.json --deny unshare,setns,chroot

The first prints the page (<p>sandboxed</p>); the second, with the namespace calls refused as a
runtime's default profile refuses them, ends in Chromium's "No usable sandbox!". Run as root (it
switches to uid 1000 itself, since Chromium's sandbox is unavailable to root), on a kernel that
allows unprivileged user namespaces.
"""
import json
import os
import sys

import seccomp  # Debian's python3-seccomp (libseccomp's own bindings)

profile_path = sys.argv[1]
deny = set()
if len(sys.argv) > 3 and sys.argv[2] == '--deny':
    deny = set(sys.argv[3].split(','))
profile = json.load(open(profile_path))
if profile['defaultAction'] != 'SCMP_ACT_ERRNO':
    sys.exit('expected an allow-list profile (defaultAction SCMP_ACT_ERRNO)')

# As a container runtime loads it: the profile's default answer for every call not listed.
syscall_filter = seccomp.SyscallFilter(seccomp.ERRNO(profile.get('defaultErrnoRet', 1)))
unknown = []
for rule in profile['syscalls']:
    if rule['action'] != 'SCMP_ACT_ALLOW':
        sys.exit(f"unexpected action {rule['action']}")
    conditions = [seccomp.Arg(arg['index'], seccomp.EQ, arg['value']) for arg in rule.get('args') or []]
    for name in rule['names']:
        if name in deny:
            continue
        try:
            syscall_filter.add_rule(seccomp.ALLOW, name, *conditions)
        except (RuntimeError, ValueError):
            unknown.append(name)  # not a call of this architecture; runtimes skip these too
print(f'{profile_path}: {len(unknown)} names unknown on this architecture', file=sys.stderr)
syscall_filter.load()

home = '/tmp/leasehold-try-chromium'
os.makedirs(home, exist_ok=True)
os.chown(home, 1000, 1000)
os.execvp('setpriv', [
    'setpriv', '--reuid', '1000', '--regid', '1000', '--clear-groups',
    'env', f'HOME={home}',
    'chromium', '--headless=new', '--disable-gpu', '--dump-dom', 'data:text/html,<p>sandboxed</p>',
])
