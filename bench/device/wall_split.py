#!/usr/bin/env python3
"""Runs a blockmm command (--stats=json on stdout) and splits its wall time: the process's own
total, what lay before and after it until the stats came out (start, and what is freed on the
way out), and the exit (from the stats' arrival to the end of the wait: blockmm prints them just
before it ends). With bench/device/exit_probe as the command, the exit after its printed clock.
  python3 wall_split.py LABEL blockmm --backend cuda -q --stats=json A.bin B.bin /dev/null
(bench/NOTES.md item 23)."""
import json, subprocess, sys, time
label = sys.argv[1]; cmd = sys.argv[2:]
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = p.stdout.read(1)
t_json = time.time()
rest = p.stdout.read()
err = p.stderr.read()
p.wait()
t_end = time.time()
if p.returncode != 0:
    print(label, 'FAILED', p.returncode, err.decode()[-300:]); sys.exit(0)
out = (first + rest).decode()
if cmd[0].endswith('exit_probe'):
    at = float(out.split(' at ')[1])
    print('%-28s wall %.3f exit %.3f | %s' % (label, t_end - t0, t_end - at, out.strip().split(' at ')[0]))
    sys.exit(0)
j = json.loads(out)
s = j['seconds']; r = j['per_rank'][0]['seconds']; b = j.get('backend_seconds', {})
print('%-10s wall %.3f total %.3f before+after %.3f exit %.3f | setup %.3f read %.3f build %.3f sym %.4f numeric %.4f (kernels %.4f)' % (
    label, t_end - t0, r['total'], t_json - t0 - r['total'], t_end - t_json, s['setup'], s['read'], s['build'], s['symbolic'], s['numeric'], s.get('numeric_compute', 0)))
keys = ['setup: context (warm-up)', 'setup: staging memory populated (beside the context)', 'setup: wait for the staging memory', 'setup: staging registered',
        'build: read + upload', 'build: pin staging slots', 'build: on the device', 'numeric: to the dense plan', 'numeric: load cuBLAS (wait)',
        'numeric: issue the first chunk (host)', 'numeric: first kernel to last copy (device)', 'numeric: drain the last chunk (host)']
print('           ', ' '.join('%s=%.4f' % (k.split(': ')[1][:18], b[k]) for k in keys if k in b))
