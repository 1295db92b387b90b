#!/bin/bash
# A real single-node Slurm cluster on localhost (Debian's munge, slurmctld,
# slurmd, started here and stopped on exit), then a sharded sweep on it:
#   1. a 500-point grid as a 4-task job array (experiments/slurm/sweep.sbatch),
#      `sbatch --wait`; task 1 is requeued (killed) mid-way and resumes;
#   2. `servesim sweep merge` of the 4 shard folders;
#   3. the merged files must be byte-identical to a local `--jobs 1` run,
#      every point exactly once, and task 1 must have resumed points.
# Usage: tools/slurm_ci.sh [BUILD_DIR]   (default build; needs root for munge
# and slurmd; tools/run.sh installs the packages). Exit 0 when all hold.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
bin=$build/servesim
[[ -x $bin ]] || { echo "slurm_ci: $bin missing; build the servesim target" >&2; exit 2; }
for p in munged slurmctld slurmd sbatch scontrol; do
  command -v "$p" >/dev/null || { echo "slurm_ci: $p missing (apt-get install munge slurmctld slurmd slurm-client)" >&2; exit 2; }
done
[[ $(id -u) == 0 ]] || { echo "slurm_ci: run as root (munged and slurmd)" >&2; exit 2; }

work=$(mktemp -d /tmp/servesim-slurm.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  local rc=$?
  set +e
  if [[ -n ${SLURM_CONF:-} ]]; then scancel --quiet --user=root 2>/dev/null; fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  if [[ $rc != 0 ]]; then
    echo "slurm_ci: FAILED (rc $rc); logs:" >&2
    tail -n 30 "$work"/*.log "$work"/out/*.out 2>/dev/null >&2
  fi
  [[ -n ${SLURM_CI_KEEP:-} ]] || rm -rf "$work"
  exit $rc
}
trap cleanup EXIT INT TERM

# --- munge: its own key (a 700 folder) and socket (a 755 folder) ---------
mkdir -p "$work/munge-key" "$work/munge"
dd if=/dev/urandom of="$work/munge-key/munge.key" bs=1 count=1024 status=none
chown -R munge:munge "$work/munge-key" "$work/munge"
chmod 700 "$work/munge-key"
chmod 400 "$work/munge-key/munge.key"
chmod 755 "$work/munge"
runuser -u munge -- munged --foreground --key-file="$work/munge-key/munge.key" \
  --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
  --seed-file="$work/munge-key/seed" --log-file="$work/munge-key/munged.log" \
  >"$work/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S $work/munge/munge.socket ]] && break; sleep 0.1; done
[[ -S $work/munge/munge.socket ]] || { echo "slurm_ci: munged did not start" >&2; exit 1; }

# --- slurm.conf: one node (this host's CPUs), one partition ---------------
port=$((20000 + RANDOM % 20000))
cpus=$(nproc)
mkdir -p "$work/state" "$work/spool" "$work/out"
export SLURM_CONF=$work/slurm.conf
cat > "$SLURM_CONF" <<EOF
ClusterName=servesimci
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
SchedulerParameters=defer
MinJobAge=300
NodeName=ci1 NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=ci1 Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.stdout.log" 2>&1 &
pids+=($!)
sleep 1
slurmd -D -N ci1 -f "$SLURM_CONF" >"$work/slurmd.stdout.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  sinfo -h -N -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)' && break
  sleep 0.2
done
sinfo -h -N -o '%N %T %c' | grep -Eq 'idle' || { echo "slurm_ci: node never came up" >&2; exit 1; }
echo "slurm_ci: cluster up: $(sinfo -h -N -o '%N %T %c CPUs')"

# --- the grid: 25 concurrencies x 20 seeds = 500 small points (each a few
# ms: enough for the requeue below to catch task 1 mid-way on a fast build) --
grid=$work/grid.textproto
{
  echo 'name: "slurm-ci"'
  echo 'base { server { device: "l4" model: "gemma-4-e2b" max_model_len: 2048 }'
  echo '       client { num_prompts: 1500 random_input_len: 256 random_output_len: 128 } }'
  printf 'axes { path: "client.max_concurrency"'
  for c in $(seq 1 25); do printf ' values: "%d"' "$c"; done
  echo ' }'
  printf 'axes { path: "client.seed"'
  for s in $(seq 0 19); do printf ' values: "%d"' "$s"; done
  echo ' }'
} >"$grid"

start=$(date +%s)
"$bin" sweep --grid "$grid" --out "$work/local" --jobs 1 --no-progress
echo "slurm_ci: local --jobs 1 run: $(( $(date +%s) - start )) s"

# --- the job array, task 1 requeued mid-way --------------------------------
cd "$work/out"
start=$(date +%s)
SERVESIM=$bin sbatch --wait --array=0-3 --cpus-per-task=1 \
  "$repo/experiments/slurm/sweep.sbatch" "$grid" "$work/shards" >"$work/sbatch.log" 2>&1 &
waiter=$!
jobid=
for _ in $(seq 100); do
  jobid=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$work/sbatch.log")
  [[ -n $jobid ]] && break
  sleep 0.1
done
[[ -n $jobid ]] || { echo "slurm_ci: sbatch gave no job id" >&2; cat "$work/sbatch.log" >&2; exit 1; }
# Task 1 is killed once it has finished some points but not all (125).
killed=0
for _ in $(seq 600); do
  n=$( (cat "$work/shards/shard-1/results.jsonl" 2>/dev/null || true) | wc -l)
  if (( n >= 10 && n < 100 )); then
    scontrol requeue "${jobid}_1" && killed=$n
    # A requeued job waits ~2 minutes (BeginTime) before it may start again:
    # once it is pending for that reason, let it start now.
    for _ in $(seq 200); do
      st=$(squeue -h -j "${jobid}_1" -o '%T %r' 2>/dev/null || true)
      if [[ $st == "PENDING BeginTime" ]]; then
        scontrol update jobid="${jobid}_1" StartTime=now
        break
      fi
      [[ $st == RUNNING* ]] && break
      sleep 0.1
    done
    break
  fi
  (( n >= 100 )) && break
  sleep 0.05
done
(( killed > 0 )) || { echo "slurm_ci: could not catch task 1 mid-way" >&2; exit 1; }
echo "slurm_ci: requeued task ${jobid}_1 after $killed of its 125 points"
wait "$waiter" || { echo "slurm_ci: sbatch --wait failed" >&2; cat "$work/sbatch.log" >&2; exit 1; }
echo "slurm_ci: array done in $(( $(date +%s) - start )) s"
for k in 0 1 2 3; do
  grep -qE "\(.* resumed, .* run, (.*, )?0 failed\)" "$work/out/servesim-sweep-${jobid}_$k.out" || {
    echo "slurm_ci: task $k did not finish cleanly" >&2; cat "$work/out/servesim-sweep-${jobid}_$k.out" >&2; exit 1; }
done
grep -q "restart 1" "$work/out/servesim-sweep-${jobid}_1.out" || { echo "slurm_ci: task 1 never restarted" >&2; exit 1; }
resumed=$(grep -o '([0-9]* resumed' "$work/out/servesim-sweep-${jobid}_1.out" | tail -1 | tr -dc 0-9)
(( resumed >= killed )) || { echo "slurm_ci: task 1 resumed $resumed points, expected >= $killed" >&2; exit 1; }
echo "slurm_ci: task 1 resumed $resumed points after its requeue"

# --- merge and compare -----------------------------------------------------
"$bin" sweep merge "$work"/shards/shard-{0,1,2,3} --out "$work/merged"
for f in grid.textproto results.jsonl results.csv; do
  cmp "$work/local/$f" "$work/merged/$f" || { echo "slurm_ci: $f differs from the local run" >&2; exit 1; }
done
points=$(cut -d, -f1 "$work/merged/results.csv" | tail -n +2 | sort -n | uniq | wc -l)
rows=$(tail -n +2 "$work/merged/results.csv" | wc -l)
[[ $points == 500 && $rows == 500 ]] || { echo "slurm_ci: $rows rows, $points distinct points" >&2; exit 1; }
echo "slurm_ci: OK: 500 points exactly once; merged files byte-identical to the local run"
