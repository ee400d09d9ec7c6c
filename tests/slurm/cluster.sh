#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for tests/test_slurm.py: munge, MariaDB,
# slurmdbd (accounting, so sacct works), slurmctld and slurmd, all state under $1.
#   cluster.sh start DIR    prints SLURM_CONF=<path> when the node is up; exits 3 if it cannot start
#   cluster.sh stop DIR
# Needs root and Debian's slurm-wlm, slurmdbd, munge and mariadb-server (.ci/run installs them).
set -uo pipefail
cmd=$1; dir=$(realpath -m "$2")
conf=$dir/slurm.conf
stop() {
  for d in slurmd slurmctld slurmdbd; do [[ -f $dir/$d.pid ]] && kill "$(cat "$dir/$d.pid")" 2>/dev/null; done
  [[ -f $dir/mysql.pid ]] && kill "$(cat "$dir/mysql.pid")" 2>/dev/null
  [[ -f $dir/munged.pid ]] && kill "$(cat "$dir/munged.pid")" 2>/dev/null
  [[ $(readlink /etc/slurm/slurm.conf 2>/dev/null) == "$conf" ]] && rm -f /etc/slurm/slurm.conf
  return 0
}
if [[ $cmd == stop ]]; then stop; exit 0; fi
fail() { echo "cannot start SLURM: $*" >&2; stop; exit 3; }
for t in munged mariadbd slurmdbd slurmctld slurmd sacctmgr; do
  command -v $t >/dev/null || [[ -x /usr/sbin/$t ]] || fail "$t is not installed"
done
[[ $(id -u) == 0 ]] || fail "the daemons need root"
mkdir -p "$dir"/{state,spool,mysql,run}
node=$(hostname -s)
read -r cpus mem < <(/usr/sbin/slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*RealMemory=\([0-9]*\).*/\1 \2/p')
# munge on its default socket (every SLURM client looks there), with a key of this cluster's own
mkdir -p /run/munge
/usr/sbin/mungekey -c -f -k "$dir/munge.key" 2>/dev/null || dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$dir/munge.key"
/usr/sbin/munged --force --key-file "$dir/munge.key" --pid-file "$dir/munged.pid" --log-file "$dir/munged.log" \
  --seed-file "$dir/munge.seed" || fail "munged did not start"
# MariaDB for the accounting database, on a free port of the loopback
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mariadb-install-db --user=root --datadir="$dir/mysql" --auth-root-authentication-method=normal >"$dir/mysql-install.log" 2>&1 \
  || fail "mariadb-install-db failed"
/usr/sbin/mariadbd --user=root --datadir="$dir/mysql" --socket="$dir/run/mysql.sock" --pid-file="$dir/mysql.pid" \
  --port="$port" --bind-address=127.0.0.1 >"$dir/mysql.log" 2>&1 &
for _ in $(seq 60); do [[ -S $dir/run/mysql.sock ]] && break; sleep 0.5; done
[[ -S $dir/run/mysql.sock ]] || fail "mariadbd did not start ($(tail -2 "$dir/mysql.log"))"
cat > "$dir/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$port
StorageLoc=slurm_acct_db
StorageUser=root
LogFile=$dir/slurmdbd.log
PidFile=$dir/slurmdbd.pid
CONF
chmod 600 "$dir/slurmdbd.conf"
cat > "$conf" <<CONF
ClusterName=trainperf
SlurmctldHost=$node
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoreFlags=job_comment
ReturnToService=2
MpiDefault=none
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$conf
# a job's own srun finds the configuration only at the default path: link it there, unless that
# path holds a real configuration (then this machine is a real cluster's, and is left alone)
if [[ -e /etc/slurm/slurm.conf && ! -L /etc/slurm/slurm.conf ]]; then fail "/etc/slurm/slurm.conf exists"; fi
mkdir -p /etc/slurm && ln -sfn "$conf" /etc/slurm/slurm.conf
/usr/sbin/slurmdbd || fail "slurmdbd did not start"  # reads slurmdbd.conf beside $SLURM_CONF
for _ in $(seq 20); do sacctmgr -i add cluster trainperf >/dev/null 2>&1 && break; sleep 1; done
sacctmgr -n list cluster format=cluster | grep -q trainperf || fail "slurmdbd does not answer ($(tail -2 "$dir/slurmdbd.log"))"
/usr/sbin/slurmctld -f "$conf" || fail "slurmctld did not start"
/usr/sbin/slurmd -f "$conf" || fail "slurmd did not start"
sacctmgr -i add account trainperf cluster=trainperf >/dev/null 2>&1
sacctmgr -i add user "$(id -un)" account=trainperf defaultaccount=trainperf >/dev/null 2>&1
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.5; done
sinfo -h -o %T | grep -q idle || fail "the node is not idle ($(sinfo -h -o '%T %E' 2>&1); $(tail -2 "$dir/slurmd.log"))"
echo "SLURM_CONF=$conf"
