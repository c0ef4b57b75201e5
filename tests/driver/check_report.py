#!/usr/bin/env python3
"""check_report.py - what a JSON report of unstall must hold.

Usage: check_report.py REPORT.json [--require RULE:API[:fixed|:native]]...
                                   [--only-prefix PREFIX] [--none]
                                   [--driver-layer yes|no] [--forbid RULE]...
                                   [--fixed-at-least RULE:API:N]...
  --require      a finding of RULE named API (fixed: at least one of its
                 calls rewritten; native: none rewritten)
  --only-prefix  every finding's API starts with PREFIX ("cuda": a runtime
                 copy was handled at the runtime layer only, not again below)
  --none         no finding at all, and no CUDA call reached the shim
  --forbid       no finding of RULE
  --fixed-at-least  at least N calls of RULE named API rewritten
  --driver-layer whether the report says what the driver layer cannot reach
                 (it does once a call was handled there)
Prints what is wrong and exits 1, or exits 0 silently.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('report')
    ap.add_argument('--require', action='append', default=[])
    ap.add_argument('--only-prefix')
    ap.add_argument('--none', action='store_true')
    ap.add_argument('--forbid', action='append', default=[])
    ap.add_argument('--fixed-at-least', action='append', default=[])
    ap.add_argument('--driver-layer', choices=('yes', 'no'))
    args = ap.parse_args()
    try:
        with open(args.report, encoding='utf-8') as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f'{args.report}: {e}')
        return 1
    findings = report.get('findings', [])
    problems = []
    for rule in args.forbid:
        hit = sorted({f["api"] for f in findings if f["rule"] == rule})
        if hit:
            problems.append(f'{rule} findings, expected none: ' + ', '.join(hit))
    if args.none:
        if findings:
            problems.append(f'{len(findings)} findings, expected none: '
                            + ', '.join(sorted({f["rule"] + ":" + f["api"] for f in findings})))
        if report.get('hooked'):
            problems.append('a CUDA call reached the shim, expected none')
    said = report.get('driver_layer') is not None
    if args.driver_layer == 'yes' and not said:
        problems.append('"driver_layer" is null: the report does not say what the driver layer cannot reach')
    if args.driver_layer == 'no' and said:
        problems.append('"driver_layer" is set: a call was handled at the driver layer')
    for want in args.require:
        rule, api, *how = want.split(':')
        rows = [f for f in findings if f['rule'] == rule and f['api'] == api]
        fixed = sum(f['fixed'] for f in rows)
        if not rows:
            problems.append(f'no {rule} finding named {api}')
        elif how == ['fixed'] and fixed == 0:
            problems.append(f'{rule} {api}: none of its calls rewritten')
        elif how == ['native'] and fixed > 0:
            problems.append(f'{rule} {api}: {fixed} calls rewritten, expected native')
    for want in args.fixed_at_least:
        rule, api, least = want.split(':')
        fixed = sum(f['fixed'] for f in findings if f['rule'] == rule and f['api'] == api)
        if fixed < int(least):
            problems.append(f'{rule} {api}: {fixed} calls rewritten, expected at least {least}')
    if args.only_prefix:
        other = sorted({f['api'] for f in findings if not f['api'].startswith(args.only_prefix)})
        if other:
            problems.append(f'findings named {", ".join(other)}: expected only {args.only_prefix}*')
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
