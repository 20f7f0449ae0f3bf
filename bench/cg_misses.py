#!/usr/bin/env python3
"""Per answer, by function: a tier's callgrind profile against its twin's.

    python3 bench/cg_misses.py TIER.cg TWIN.cg [EVENT] [TOP]
    python3 bench/cg_misses.py --callers REGEX TIER.cg TWIN.cg [EVENT] [TOP]

The profiles are `bench/twins-profile.sh`'s raw ones (KEEP=dir; CACHE=1 for
the miss events D1mr, D1mw, DLmr, DLmw). EVENT defaults to D1mw (L1 write
misses). Each profile is divided by the answers its process wrote, not by
wrk's count: every answer serializes the same 163 JSON strings, so answers
= calls to serde_json's `format_escaped_str_contents` ÷ 163 (wrk's count
leaves out the requests its warm-up run abandoned, which the tiers answer
and the twins drop; bench/README.md, issue 56, eleventh pass). Prints the
totals, then each function's own cost (its callees left out) per answer,
largest difference first (TOP 0: the totals only). With --callers, the cost of calls INTO the
functions matching REGEX, by the calling function (e.g. who pays for
memcpy's misses).
"""
import collections
import re
import sys

STRINGS_PER_ANSWER = 163
ANSWER_MARK = "format_escaped_str_contents"


def expand(names, tok):
    """A callgrind function name: `(id) name` defines a compressed name (kept
    in `names`), `(id)` uses one, anything else is the name itself."""
    m = re.match(r"\((\d+)\)(?: (.*))?", tok)
    if not m:
        return tok
    if m.group(2):
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), tok)


def parse(path, event, callers_of=None):
    """(own cost by function, answers) or, with callers_of, (cost of calls into it by caller, answers)."""
    names, events, own, into = {}, None, collections.Counter(), collections.Counter()
    fn = cfn = None
    after_calls = False
    marks = 0

    def name(tok):
        return expand(names, tok)

    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("fn="):
            fn = name(line[3:].strip())
        elif line.startswith("cfn="):
            cfn = name(line[4:].strip())
        elif line.startswith("calls="):
            if cfn and ANSWER_MARK in cfn:
                marks += int(line[6:].split()[0])
            after_calls = True
        elif line[:1].isdigit() or line[:1] in ("+", "-", "*"):
            if events is None or event not in events:
                sys.exit(f"{path}: no {event} event (CACHE=1 for the miss events)")
            cols = line.split()[1:]
            i = events.index(event)
            cost = int(cols[i]) if i < len(cols) else 0
            if after_calls:
                after_calls = False
                if callers_of and cfn and callers_of.search(cfn):
                    into[fn] += cost
            else:
                own[fn] += cost
    answers = marks / STRINGS_PER_ANSWER
    if answers == 0:
        sys.exit(f"{path}: no answers written (no calls to {ANSWER_MARK})")
    return (into if callers_of else own), answers


def main():
    args = sys.argv[1:]
    callers_of = None
    if args[:1] == ["--callers"]:
        callers_of, args = re.compile(args[1]), args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    tier, twin = args[0], args[1]
    event = args[2] if len(args) > 2 else "D1mw"
    top = int(args[3]) if len(args) > 3 else 20
    a, na = parse(tier, event, callers_of)
    b, nb = parse(twin, event, callers_of)
    what = f"calls into /{callers_of.pattern}/" if callers_of else "own cost"
    print(f"{event} per answer ({what}): tier {sum(a.values()) / na:,.1f} over {na:,.0f} answers, "
          f"twin {sum(b.values()) / nb:,.1f} over {nb:,.0f}")
    rows = [(a[k] / na - b[k] / nb, a[k] / na, b[k] / nb, k) for k in set(a) | set(b)]
    if top == 0:
        return
    print(f"{'tier - twin':>11} {'tier':>9} {'twin':>9}  function")
    for d, x, y, k in sorted(rows, key=lambda r: -abs(r[0]))[:top]:
        print(f"{d:+11.1f} {x:9.1f} {y:9.1f}  {k[:140]}")


if __name__ == "__main__":
    main()
