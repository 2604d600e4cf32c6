#!/usr/bin/env python3
"""Runs cohort-bench (under cohort-run or mpirun, or alone) and checks what it reports.

--expect ok:    exit 0, rank 0 alone printed the table with "Out of bounds values : 0 OK",
                the JSON parses with world_size and rows, and every row has wrong == 0.
--expect wrong: exit non-zero, the table says FAILED and the JSON has rows with wrong > 0.
--files:        also write --csv and --plot and parse them back (csv, xml.etree).
--peer-rows X:  rows from implementation X must be present (with 0 wrong under --expect ok).
--expect refused --message M:
                exit 2 before any table, with M in the error on stderr. With --unless-device,
                an exit 0 (a CUDA device was there, so nothing was refused) is a skip (77).
Arguments after "--" go to cohort-bench.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def fail(message, proc=None):
    print("FAIL: " + message)
    if proc is not None:
        print("---- exit code: %s" % proc.returncode)
        print("---- stdout:\n" + proc.stdout)
        print("---- stderr:\n" + proc.stderr)
    sys.exit(1)


def check_refused(args, proc):
    if proc.returncode == 0 and args.unless_device:
        print("SKIP: the run succeeded, so a CUDA device is present and nothing was refused")
        sys.exit(77)
    if proc.returncode != 2:
        fail("expected exit 2 (refused)", proc)
    if args.message not in proc.stderr:
        fail("stderr lacks %r" % args.message, proc)
    if "# Out of bounds values" in proc.stdout:
        fail("a refused run printed a table", proc)
    print("OK: refused with: " + proc.stderr.strip())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--launcher")
    parser.add_argument("--mpirun", action="store_true")
    parser.add_argument("-n", type=int, default=1)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--expect", choices=["ok", "wrong", "refused"], required=True)
    parser.add_argument("--message")
    parser.add_argument("--unless-device", action="store_true")
    parser.add_argument("--files", action="store_true")
    parser.add_argument("--peer-rows")
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    bench_args = [a for a in args.bench_args if a != "--"]
    # Meson passes build-relative paths; the run happens in a scratch directory.
    bench = os.path.abspath(args.bench)
    launcher = os.path.abspath(args.launcher) if args.launcher else None

    with tempfile.TemporaryDirectory(prefix="cohort-bench-run-") as tmp:
        json_path = os.path.join(tmp, "results.json")
        csv_path = os.path.join(tmp, "results.csv")
        svg_path = os.path.join(tmp, "results.svg")
        command = [bench] + bench_args + ["--json", json_path]
        if args.files:
            command += ["--csv", csv_path, "--plot", svg_path]
        if launcher and args.mpirun:
            command = [launcher, "--allow-run-as-root", "--oversubscribe", "-n",
                       str(args.n)] + command
        elif launcher:
            command = [launcher, "-n", str(args.n), "--"] + command
        env = dict(os.environ, COHORT_RENDEZVOUS_DIR=tmp, COHORT_TIMEOUT="60")
        try:
            proc = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=args.timeout, cwd=tmp)
        except subprocess.TimeoutExpired as e:
            fail("timed out after %s s: %s\nstdout: %s" % (args.timeout, command, e.stdout))

        if args.expect == "refused":
            check_refused(args, proc)
            return
        if args.expect == "ok" and proc.returncode != 0:
            fail("expected exit 0", proc)
        if args.expect == "wrong" and proc.returncode == 0:
            fail("expected a non-zero exit for wrong results", proc)
        trailers = [l for l in proc.stdout.splitlines() if "# Out of bounds values" in l]
        if len(trailers) != 1:
            fail("expected exactly one table trailer (rank 0 only), got %d" % len(trailers), proc)
        verdict = "0 OK" if args.expect == "ok" else "FAILED"
        if verdict not in trailers[0]:
            fail("trailer %r lacks %r" % (trailers[0], verdict), proc)
        if not any("Avg bus bandwidth" in l for l in proc.stdout.splitlines()):
            fail("no Avg bus bandwidth trailer", proc)

        try:
            with open(json_path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail("JSON unreadable: %s" % e, proc)
        for key in ("world_size", "op", "dtype", "redop", "hostname", "cohort_version", "rows"):
            if key not in doc:
                fail("JSON lacks %r" % key, proc)
        if doc["world_size"] != args.n:
            fail("world_size %s, expected %d" % (doc["world_size"], args.n), proc)
        fresh = "--fresh-input" in bench_args
        if doc.get("fresh_input") is not fresh:
            fail("fresh_input %r, expected %r" % (doc.get("fresh_input"), fresh), proc)
        if fresh and "(fresh input, calls timed alone)" not in proc.stdout:
            fail("the header does not say the input was fresh", proc)
        rows = doc["rows"]
        if not rows:
            fail("JSON has no rows", proc)
        wrong = sum(r["wrong"] for r in rows)
        if args.expect == "ok" and wrong != 0:
            bad = [r for r in rows if r["wrong"]]
            fail("%d wrong elements, first rows: %s" % (wrong, bad[:5]), proc)
        if args.expect == "wrong" and wrong == 0:
            fail("--inject-wrong produced no wrong elements", proc)
        if not any(r["impl"] == "cohort" for r in rows):
            fail("no cohort rows", proc)
        if args.peer_rows and not any(r["impl"] == args.peer_rows for r in rows):
            fail("no %s rows" % args.peer_rows, proc)
        for r in rows:
            if r["time_us"] is None or r["time_us"] < 0:
                fail("bad time in row %s" % r, proc)

        if args.files:
            with open(csv_path, newline="") as f:
                records = list(csv.DictReader(f))
            if len(records) != len(rows):
                fail("CSV has %d records, JSON %d rows" % (len(records), len(rows)), proc)
            try:
                root = ET.parse(svg_path).getroot()
            except ET.ParseError as e:
                fail("SVG is not well-formed: %s" % e, proc)
            if not root.tag.endswith("svg"):
                fail("SVG root is %s" % root.tag, proc)

        impls = sorted({r["impl"] for r in rows})
        print("OK: %d rows (%s), %d wrong, exit %d" % (len(rows), ", ".join(impls), wrong,
                                                       proc.returncode))
        print(proc.stdout)


if __name__ == "__main__":
    main()
