#!/usr/bin/env python3
"""Summarizes a tempest run's subunit v2 stream: counts, each failure with the last line of
its traceback, skips grouped by reason; last line `N passed, N failed, N skipped`.

    python summarize.py last-run.subunit [--all-skips]
"""

import collections
import re
import sys

import subunit
import testtools


def one_line(text, limit=300):
    lines = [ln.rstrip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "(no traceback)"
    # The exception line: the last one that does not start with blanks (tracebacks indent
    # their frames); tempest adds a "Details: ..." line after some exceptions.
    idx = max((i for i, ln in enumerate(lines) if not ln.startswith((" ", "\t"))), default=len(lines) - 1)
    line = lines[idx]
    if line.startswith("Details:") and idx > 0:
        line = lines[idx - 1] + " " + line
    elif idx + 1 < len(lines) and lines[idx + 1].lstrip().startswith("Details:"):
        line += " " + lines[idx + 1].strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def text_of(details, *names):
    for n in names:
        if n in details:
            try:
                return details[n].as_text()
            except Exception:
                return "".join(c.decode("utf-8", "replace") for c in details[n].iter_bytes())
    return ""


def main():
    path = sys.argv[1]
    show_all = "--all-skips" in sys.argv
    tests = []
    with open(path, "rb") as f:
        case = subunit.ByteStreamToStreamResult(f, non_subunit_name="stdout")
        result = testtools.StreamToDict(tests.append)
        result.startTestRun()
        try:
            case.run(result)
        finally:
            result.stopTestRun()
    by = collections.defaultdict(list)
    for t in tests:
        if t["status"] in ("exists", "inprogress"):
            continue
        by[t["status"]].append(t)
    passed = len(by["success"]) + len(by["xfail"])
    failed = len(by["fail"]) + len(by["uxsuccess"])
    skipped = len(by["skip"])
    secs = 0.0
    stamps = [ts for t in tests for ts in t["timestamps"] if ts]
    if stamps:
        secs = (max(stamps) - min(stamps)).total_seconds()
    print(f"\n=== tempest: {passed + failed + skipped} tests, {passed} passed, {failed} failed, "
          f"{skipped} skipped, {secs:.0f} s from first start to last end")
    if by["fail"] or by["uxsuccess"]:
        print("--- failures (test id: the exception line of its traceback)")
        for t in sorted(by["fail"] + by["uxsuccess"], key=lambda t: t["id"]):
            print(f"FAIL {t['id']}\n     {one_line(text_of(t['details'], 'traceback', 'reason'))}")
    if by["skip"]:
        print("--- skips, by reason")
        reasons = collections.defaultdict(list)
        for t in by["skip"]:
            r = text_of(t["details"], "reason", "traceback").strip() or "(no reason)"
            reasons[re.sub(r"\s+", " ", r)].append(t["id"])
        for r, ids in sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"SKIP x{len(ids)}: {r}")
            for i in sorted(ids) if show_all or len(ids) <= 3 else sorted(ids)[:3] + [f"... {len(ids) - 3} more"]:
                print(f"       {i}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
