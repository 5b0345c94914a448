#!/usr/bin/env bash
# make test-cluster: docs/cluster.md's Slurm recipes, verbatim, on a real one-node Slurm.
#
# Starts munged, slurmctld and slurmd on 127.0.0.1 with everything under build/cluster/ (config,
# munge key, state, spool, logs), lays out a submit directory as the doc assumes, extracts the
# doc's blocks by their `<!-- test-cluster: NAME -->` markers (so the doc is what runs), submits
# the night and the offline probe, waits for the queue to drain, and compares the merged results
# with single runs. Every daemon it started is stopped on exit (trap), whatever happened.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/build/cluster
PY=$ROOT/.venv/bin/python
E3F=$ROOT/.venv/bin/eagle3-forensics
WAIT_S=${E3F_CLUSTER_WAIT_S:-1500}
t0=$(date +%s)

for tool in munged slurmctld slurmd sbatch squeue sinfo; do
    command -v "$tool" >/dev/null || { echo "test-cluster: $tool missing (make test-cluster installs slurm-wlm and munge as root)" >&2; exit 2; }
done
[ -x "$E3F" ] || { echo "test-cluster: $E3F missing: run make setup" >&2; exit 2; }

cancel_jobs() {  # while slurmctld is up: stopping slurmd alone leaves running job steps behind
    [ -s "$B/run/slurmctld.pid" ] && kill -0 "$(cat "$B/run/slurmctld.pid")" 2>/dev/null || return 0
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    [ -n "$jobs" ] || return 0
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 60); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
}
stop_daemons() {
    local f pid
    for f in slurmd slurmctld munged; do
        [ -s "$B/run/$f.pid" ] || continue
        pid=$(cat "$B/run/$f.pid")
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    done
}
on_exit() {
    local rc=$?
    if [ -d "$B/jobs" ] && [ "$rc" != 0 ]; then
        echo "test-cluster: FAILED (exit $rc); job logs:" >&2
        tail -n 5 "$B"/jobs/logs/*.out 2>/dev/null | tail -n 60 >&2 || true
        tail -n 15 "$B"/log/slurmctld.log >&2 || true
    fi
    cancel_jobs
    stop_daemons
    echo "test-cluster: daemons stopped; $(($(date +%s) - t0)) s in all"
}
if [ -d "$B/run" ]; then  # a previous run's leftovers (its trap did not run: SIGKILL)
    export SLURM_CONF=$B/slurm.conf
    cancel_jobs
    stop_daemons
fi
rm -rf "$B"
mkdir -p "$B"/{state,spool,log,run,work}
chmod 755 "$B/run"  # munged's socket must be reachable by the job steps
trap on_exit EXIT
trap 'exit 130' INT TERM

read -r CTLD_PORT SLURMD_PORT < <("$PY" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
')

# -- munge: a fresh key, its own socket --------------------------------------------------------------
head -c 1024 /dev/urandom > "$B/munge.key"
chmod 400 "$B/munge.key"
munged --force --key-file="$B/munge.key" --socket="$B/run/munge.sock" --pid-file="$B/run/munged.pid" \
    --log-file="$B/log/munged.log" --seed-file="$B/run/munged.seed"

# -- slurm: one node with 8 CPUs (config_overrides: more than the machine has), a gpu GRES --------
cat > "$B/slurm.conf" <<EOF
ClusterName=e3ftest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$B/run/munge.sock
CredType=cred/munge
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=e3f-node NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=8 RealMemory=65536 Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=e3f-node Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=e3f-node MaxTime=INFINITE State=UP
EOF
echo "NodeName=e3f-node Name=gpu File=/dev/null" > "$B/gres.conf"
export SLURM_CONF=$B/slurm.conf
slurmctld -c -i
slurmd -N e3f-node
for _ in $(seq 60); do
    [ "$(sinfo -h -o %T 2>/dev/null | sort -u)" = "idle" ] && break
    sleep 0.5
done
[ "$(sinfo -h -o %T | sort -u)" = "idle" ] || { echo "test-cluster: the node never became idle: $(sinfo -R)" >&2; exit 1; }
echo "test-cluster: Slurm $(sinfo -V | cut -d' ' -f2) up on 127.0.0.1:$CTLD_PORT ($(($(date +%s) - t0)) s)"

# -- the submit directory the doc assumes --------------------------------------------------------------
W=$B/jobs
mkdir -p "$W/configs" "$W/drafters" "$W/dumps" "$W/models"
ln -s "$ROOT/.venv" "$W/.venv"
ln -s "$ROOT/notebooks" "$W/notebooks"  # configs/demo.yaml's paths are relative: ../notebooks, ../data
ln -s "$ROOT/data" "$W/data"
ln -s "$ROOT/data/demo/drafters/healthy" "$W/drafters/my-eagle3"
ln -s "$ROOT/data/demo/dumps/specforge" "$W/dumps/ultrachat"
ln -s "$ROOT/data/demo/target" "$W/models/target"
cp "$ROOT/configs/demo_baseline.json" "$W/configs/nightly_baseline.json"
{ cat "$ROOT/configs/demo.yaml"; printf '\npools:\n  gpu: [00_triage, 04_accept_rate_probe]\n'; } > "$W/configs/nightly.yaml"
"$PY" - "$ROOT/docs/cluster.md" "$W" <<'EOF'
import re, sys
from pathlib import Path
doc, out = Path(sys.argv[1]).read_text(), Path(sys.argv[2])
blocks = re.findall(r"<!-- test-cluster: (\S+) -->\n```\w*\n(.*?)```", doc, flags=re.S)
want = {"shards-cpu.sbatch", "shards-gpu.sbatch", "merge.sbatch", "submit-night.sh",
        "probe-offline.sbatch", "probe-offline-merge.sbatch", "submit-probe-offline.sh"}
missing = want - {name for name, _ in blocks}
if missing:
    sys.exit(f"test-cluster: docs/cluster.md has no block marked {', '.join(sorted(missing))}")
for name, text in blocks:
    (out / name).write_text(text)
print(f"test-cluster: {len(blocks)} blocks from docs/cluster.md")
EOF

# -- submit as the doc does, wait for the queue to drain ----------------------------------------------
cd "$W"
bash submit-night.sh
bash submit-probe-offline.sh
waited=0
while [ -n "$(squeue -h -o %i)" ]; do
    [ "$waited" -lt "$WAIT_S" ] || { echo "test-cluster: jobs still queued after $WAIT_S s:" >&2; squeue >&2; exit 1; }
    sleep 5
    waited=$((waited + 5))
done
echo "test-cluster: the queue drained in $waited s (submitted to drained); $(ls logs | wc -l) job logs"
NIGHT=$(ls reports | grep -E '^[0-9]{8}$' | head -1)
[ -n "$NIGHT" ] || { echo "test-cluster: no reports/NIGHT: the merges did not run" >&2; exit 1; }

# -- the single runs, and the comparison --------------------------------------------------------------
"$E3F" run --config configs/nightly.yaml --no-progress --out single --baseline configs/nightly_baseline.json \
    --history single-history --gate-window 7 --bundle single.zip > /dev/null 2> logs/single-run.err || [ $? -eq 1 ]
"$E3F" probe-offline drafters/my-eagle3 --data dumps/ultrachat --target models/target --no-progress --json \
    > single-probe-offline.json 2> logs/single-probe.err || [ $? -eq 1 ]
"$PY" - "$NIGHT" <<'EOF'
import json, re, sys
from pathlib import Path
from eagle3_forensics.runs.shard import comparable, comparable_html
night = sys.argv[1]
merged, single = Path("reports") / night, Path("single")
log = json.loads(Path(f"logs/merge-{night}.json").read_text())
parts = sorted(p["shard"] for p in log["parts"] or [])
assert log["error"] is None, log["error"]
assert parts == sorted([f"default:{i}/8" for i in range(8)] + [f"gpu:{i}/4" for i in range(4)]), parts
a = json.loads((single / "summary.json").read_text())
b = json.loads((merged / "summary.json").read_text())
ca, cb = comparable(a), comparable(b)
for s in (ca, cb):  # where each history went: the only member that names a path of its own
    (s.get("history") or {}).pop("directory", None)
if ca != cb:
    diff = [k for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)]
    sys.exit(f"test-cluster: merged summary differs from the single run in {diff}")
def page(path, history):
    """index.html, timings aside: also the trend's plots and its entries' times (when each ran)."""
    text = comparable_html(path.read_text()).replace(history, "H")
    text = re.sub(r'<img class="trend"[^>]*>', "", text)
    return re.sub(r"\b\d\d-\d\d \d\d:\d\d\b", "T", text)
assert page(single / "index.html", "single-history") == page(merged / "index.html", "nightly-history"), "index.html differs"
assert Path(f"reports/{night}.zip").is_file(), "no bundle"
off = Path(f"reports/{night}/probe-offline.json").read_text()
assert off == Path("single-probe-offline.json").read_text(), "merged probe-offline differs from the single run"
print(f"test-cluster: identical — run: {len(b['runs'])} notebook runs from {len(parts)} shards "
      f"(gate {'passed' if b['gate']['passed'] else 'FAILED'}); probe-offline: 8 partials merged byte for byte")
EOF
echo "test-cluster: ok"
