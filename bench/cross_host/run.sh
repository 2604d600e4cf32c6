#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair, each with its own
# hostname (a UTS namespace), one cohort-run per namespace (--nnodes 2), UCX over TCP between
# them. Measures the link's own ceiling with UCX's ucx_perftest between the same two namespaces
# (tag_bw at each size, tag_lat at 8 bytes), then cohort-bench's sweep, and writes both side by
# side: <out>/cross_host.json (rows with cohort's busbw, the ceiling and their ratio) and
# cohort-bench's own <out>/cross_host_<op>.json and .svg.
#
# Where iperf3 is installed, it also measures plain TCP over the same veth, one way and both ways
# at once (--bidir, one process per side). An allreduce, sendrecv or allgather loads both
# directions at once, and on a machine with few cores both directions' kernel work shares them,
# so each direction then carries less than one-way tag_bw: this shows how much less. ucx_perftest
# has no both-ways test, and two of its runs in opposite directions are four processes busy-
# polling on the cores the kernel needs.
#
# With -r RATE (tc's units: 4gbit, 500mbit) each direction of the link is shaped to RATE by a
# token bucket on each end of the veth. Unshaped, the veth is as fast as the cores that copy
# through it, and an op that loads both directions at once finds the two vCPUs, not the link,
# to be the limit (a both-ways allreduce then gets about half of one-way tag_bw). Shaped below
# what the cores carry both ways, the link is the limit again, as between real hosts, and the
# ratios to the ceiling say what cohort's own protocol costs.
#
# Each host gets its own half of the CPUs this script may use (taskset), as real hosts have cores
# of their own: left sharing all of them, a host's waiting ranks spin on the cores the other
# host's ranks and its kernel need, believing they have a core each (two ranks per host on two
# vCPUs: 1.2-2.3x the time of one per host at 1-256 MiB on 2026-11-29), which no pair of real
# hosts would see.
# -S leaves every process on every CPU.
#
# Usage: bench/cross_host/run.sh [-b BUILD] [-o OUT] [-n RANKS_PER_HOST] [-r RATE] [-S] [-- cohort-bench args]
#   defaults: build, bench/results, 1 rank per host, `-o allreduce -b 8 -e 256M -f 4 -n 10`.
# Needs root (namespaces, veth); without it, says so and exits 77. Cleans up on every exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=build
out=bench/results
per_host=1
rate=""
split_cpus=1
while [ $# -gt 0 ]; do
  case "$1" in
    -b) build=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -n) per_host=$2; shift 2 ;;
    -r) rate=$2; shift 2 ;;
    -S) split_cpus=0; shift ;;
    --) shift; break ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
bench_args=("$@")
[ ${#bench_args[@]} -gt 0 ] || bench_args=(-o allreduce -b 8 -e 256M -f 4 -n 10)

if [ "$(id -u)" -ne 0 ]; then
  echo "cross_host: needs root to create network namespaces and a veth pair; skipping" >&2
  exit 77
fi
tools=(ip unshare ucx_perftest python3)
[ -z "$rate" ] || tools+=(tc)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "cross_host: $tool not found; skipping" >&2; exit 77; }
done
run=$build/tools/cohort_run/cohort-run
bench=$build/bench/cohort_bench/cohort-bench
[ -x "$run" ] && [ -x "$bench" ] || { echo "cross_host: build $build first (ninja -C $build)" >&2; exit 2; }
run=$(realpath "$run"); bench=$(realpath "$bench")
mkdir -p "$out"; out=$(realpath "$out")

# Names unique to this run, so two runs (or a crashed earlier one) never collide.
tag="ch$$"
ns=("${tag}a" "${tag}b")
dev=("${tag}va" "${tag}vb")
addr=(10.231.0.1 10.231.0.2)
work=$(mktemp -d)
cleanup() {
  for n in "${ns[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "${ns[0]}"
ip netns add "${ns[1]}"
ip link add "${dev[0]}" type veth peer name "${dev[1]}"
for i in 0 1; do
  ip link set "${dev[$i]}" netns "${ns[$i]}"
  ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${dev[$i]}"
  ip -n "${ns[$i]}" link set "${dev[$i]}" up
  ip -n "${ns[$i]}" link set lo up
  if [ -n "$rate" ]; then
    # A bucket of half a millisecond at the rate, at least 256 KiB: the veth hands the qdisc
    # segments of up to 64 KiB, and a bucket of fewer than a few of them throttles below the
    # rate; a larger one lets a whole 1 MiB message through unshaped. A queue of 5 ms at most,
    # as a switch port's might hold (2 and 5 ms measured alike; 50 ms too).
    burst=$(python3 - "$rate" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1].lower())
if not m:
    sys.exit(f"cross_host: -r takes a rate such as 4gbit or 500mbit, not {sys.argv[1]}")
bits = float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]]
print(max(int(bits / 8 * 0.0005), 256 << 10))
PY
)
    ip netns exec "${ns[$i]}" tc qdisc add dev "${dev[$i]}" root tbf rate "$rate" burst "$burst" latency 5ms
  fi
done
[ -z "$rate" ] || echo "link shaped to $rate each way (tc tbf on both ends of the veth)" >&2

# Host i's CPUs: the first or second half of this script's own (one CPU: both share it).
mapfile -t host_cpus < <(python3 -c '
import os, sys
cpus = sorted(os.sched_getaffinity(0))
half = max(1, len(cpus) // 2)
split = sys.argv[1] == "1" and len(cpus) > 1
for part in ((cpus[:half], cpus[half:]) if split else (cpus, cpus)):
    print(",".join(map(str, part)))' "$split_cpus")
echo "host 0 runs on CPUs ${host_cpus[0]}, host 1 on ${host_cpus[1]}" >&2

# Runs a command in host i: its namespace, its own hostname and CPUs, UCX on its veth only.
on_host() {
  local i=$1; shift
  ip netns exec "${ns[$i]}" taskset -c "${host_cpus[$i]}" unshare --uts \
    env UCX_NET_DEVICES="${dev[$i]}" sh -c 'hostname "$0" && exec "$@"' "${tag}-host$i" "$@"
}

# ---- ceiling: ucx_perftest between the namespaces -----------------------------------------------
# The server accepts one client per run; the client retries until the server listens.
perftest() {  # perftest <test> <bytes> <iters> -> prints "<MB/s> <usec>" from its final line
  local test=$1 bytes=$2 iters=$3 port=$((20000 + RANDOM % 20000))
  on_host 1 env UCX_TLS=tcp,self ucx_perftest -p "$port" >"$work/server.log" 2>&1 &
  local server=$! line="" attempt
  for attempt in $(seq 1 200); do
    if line=$(on_host 0 env UCX_TLS=tcp,self ucx_perftest "${addr[1]}" -p "$port" -t "$test" \
                -s "$bytes" -n "$iters" 2>/dev/null | grep '^Final:'); then
      break
    fi
    kill -0 "$server" 2>/dev/null || { echo "cross_host: ucx_perftest server died" >&2; cat "$work/server.log" >&2; exit 1; }
  done
  wait "$server" || true
  # Final: iters 50%ile avg overall bw_avg(MB/s) bw_overall msgrate_avg msgrate_overall
  echo "$line" | awk '{print $6, $4}'
}

# ---- plain TCP, one way and both ways at once (iperf3, when installed) -------------------------
tcp_one_way="" tcp_both_ways=""
if command -v iperf3 >/dev/null; then
  iperf() {  # iperf <extra args> -> the JSON's end section, with the server on host 1
    local port=$((20000 + RANDOM % 20000)) result attempt
    on_host 1 iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
    local server=$!
    for attempt in $(seq 1 200); do  # the client retries until the server listens
      # With --json, iperf3 reports a refused connection in the JSON ("error"), exiting 0.
      result=$(on_host 0 iperf3 -c "${addr[1]}" -p "$port" -t 3 -l 1M --json "$@" 2>/dev/null) || true
      grep -q '"error"' <<<"$result" || break
      result=""
    done
    [ -n "$result" ] || { kill "$server"; echo "cross_host: iperf3 never connected" >&2; exit 1; }
    wait "$server" || true
    echo "$result"
  }
  # GB/s: one way; both ways as "<host0 to 1> <host1 to 0>", each its receiver's count.
  tcp_one_way=$(iperf | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e9)')
  tcp_both_ways=$(iperf --bidir | python3 -c '
import json, sys
end = json.load(sys.stdin)["end"]
print(end["sum_received"]["bits_per_second"] / 8e9, end["sum_received_bidir_reverse"]["bits_per_second"] / 8e9)')
  echo "plain TCP (iperf3, 3 s, 1 MiB writes): one way $tcp_one_way GB/s; both ways at once: $tcp_both_ways GB/s" >&2
else
  echo "cross_host: iperf3 not installed; no plain TCP reference" >&2
fi

echo "ceiling: ucx_perftest tag_lat 8 B and tag_bw per size between the two namespaces" >&2
read -r _ lat_us < <(perftest tag_lat 8 20000)
sizes=$(python3 - "${bench_args[@]}" <<'PY'
import sys
args = sys.argv[1:]
def value(flag, default):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
    return default
def parse(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)
lo, hi, f = parse(value("-b", "8")), parse(value("-e", "64M")), int(value("-f", "2"))
s = lo  # the sizes cohort-bench will run; the bandwidth ceiling is measured from 1 MiB up
while s <= hi:
    if s >= 1 << 20:
        print(s)
    s *= f
PY
)
ceiling_rows=()
for s in $sizes; do
  iters=$(( s >= 64 << 20 ? 10 : 50 ))
  read -r mbps _ < <(perftest tag_bw "$s" "$iters")
  ceiling_rows+=("$s $mbps")
  echo "  tag_bw $s B: $mbps MB/s" >&2
done

# ---- cohort: one cohort-run per host ------------------------------------------------------------
op=$(python3 -c 'import sys; a=sys.argv[1:]; print(a[a.index("-o")+1] if "-o" in a else "allreduce")' "${bench_args[@]}")
json="$out/cross_host_${op}.json"
svg="$out/cross_host_${op}.svg"
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$((20000 + RANDOM % 20000))
for i in 1 0; do
  extra=()
  [ "$i" -eq 0 ] && extra=(--json "$json" --plot "$svg")
  on_host "$i" env COHORT_TOKEN="$token" "$run" --nnodes 2 --node-rank "$i" -n "$per_host" \
    --master-addr "${addr[0]}" --master-port "$port" --timeout 3600 -- \
    "$bench" "${bench_args[@]}" "${extra[@]}" >"$work/host$i.out" 2>&1 &
  eval "pid$i=$!"
done
status=0
wait "$pid0" || status=$?
wait "$pid1" || status=$?
cat "$work/host0.out"
if [ "$status" -ne 0 ]; then
  echo "cross_host: the cohort job failed ($status); host 1 said:" >&2
  tail -20 "$work/host1.out" >&2
  exit "$status"
fi

# ---- side by side ---------------------------------------------------------------------------------
python3 - "$json" "$out/cross_host.json" "$lat_us" "$per_host" "$tcp_one_way" "$tcp_both_ways" \
  "$rate" "${host_cpus[0]}" "${host_cpus[1]}" "${ceiling_rows[@]}" <<'PY'
import json, sys, datetime
bench_path, out_path, lat_us, per_host, tcp_one_way, tcp_both_ways, rate = sys.argv[1:8]
host_cpus = sys.argv[8:10]
ceiling = {}
for row in sys.argv[10:]:
    size, mbps = row.split()
    ceiling[int(size)] = float(mbps) * (1 << 20) / 1e9  # ucx_perftest's MB/s are MiB/s
data = json.load(open(bench_path))
rows = data["rows"] if isinstance(data, dict) and "rows" in data else data
combined = []
print(f"\n{'bytes':>12} {'form':>8} {'busbw GB/s':>11} {'tag_bw GB/s':>12} {'ratio':>6} {'time us':>9}")
for r in rows:
    if r.get("impl") != "cohort":
        continue
    size = int(r["size_bytes"])
    entry = {"bytes": size, "form": "inplace" if r.get("in_place") else "out", "busbw_gbps": r.get("busbw_gbps"),
             "time_us": r.get("time_us"), "tag_bw_gbps": ceiling.get(size)}
    if entry["tag_bw_gbps"] and entry["busbw_gbps"] is not None:
        entry["ratio"] = entry["busbw_gbps"] / entry["tag_bw_gbps"]
    combined.append(entry)
    ceil = f"{entry['tag_bw_gbps']:.2f}" if entry["tag_bw_gbps"] else "-"
    ratio = f"{entry['ratio']:.2f}" if "ratio" in entry else "-"
    print(f"{size:>12} {entry['form']:>8} {entry['busbw_gbps']:>11.3f} {ceil:>12} {ratio:>6} "
          f"{entry['time_us']:>9.1f}")
summary = {"date": datetime.date.today().isoformat(), "ranks_per_host": int(per_host),
           "link_shaped_to": rate or None, "host_cpus": host_cpus,
           "tag_lat_8B_us": float(lat_us), "rows": combined}
if tcp_one_way:
    summary["tcp_one_way_gbps"] = float(tcp_one_way)
    summary["tcp_both_ways_gbps"] = [float(x) for x in tcp_both_ways.split()]
json.dump(summary, open(out_path, "w"), indent=1)
print(f"\ntag_lat 8 B one way: {float(lat_us):.2f} us; written: {out_path}")
if tcp_one_way:
    print(f"plain TCP (iperf3): one way {float(tcp_one_way):.2f} GB/s; both ways at once "
          + " and ".join(f"{float(x):.2f}" for x in tcp_both_ways.split()) + " GB/s")
PY
