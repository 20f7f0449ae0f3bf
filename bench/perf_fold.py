#!/usr/bin/env python3
"""Inclusive samples by function, a tier against its twin, from call chains.

    perf script --no-inline -F ip,sym -i REAL.perf.data > real.stacks
    perf script --no-inline -F ip,sym -i TWIN.perf.data > twin.stacks
    python3 bench/perf_fold.py real.stacks twin.stacks [ROWS]

The perf.data files come from `CALLS=1 KEEP=dir TOOL=perf bash
bench/twins-profile.sh` (same rate and window for both). A function counts
once for each sample whose chain holds it anywhere; `plain_caller` is read
as `caller` so the two binaries' names meet. Prints both totals and the
ROWS (default 50) functions the tier holds most more often than its twin.
"""
import collections
import re
import sys


def norm(s):
    return re.sub(r"\+0x[0-9a-f]+$", "", s.replace("plain_caller", "caller"))[:140]


def load(path):
    incl, n, stack = collections.Counter(), 0, []
    for line in list(open(path)) + [""]:
        if not line.strip():
            if stack:
                n += 1
                incl.update(set(stack))
            stack = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            stack.append(norm(parts[1]))
    return incl, n


a, na = load(sys.argv[1])
b, nb = load(sys.argv[2])
print("samples: tier %d, twin %d, ratio %.3f" % (na, nb, na / max(nb, 1)))
rows = sorted(((a[k] - b[k], a[k], b[k], k) for k in set(a) | set(b)), reverse=True)
for r in rows[: int(sys.argv[3]) if len(sys.argv) > 3 else 50]:
    print("%+6d %6d %6d %s" % r)
