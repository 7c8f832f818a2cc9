#!/usr/bin/env bash
# A throw-away sshd for this user on localhost, for the tests that run xdist workers over real ssh gateways.
#   eval "$(bash scripts/sshd-local.sh start)"   # exports GPUENV_TEST_SSH (the --tx ssh= value) and SSHD_LOCAL_DIR
#   bash scripts/sshd-local.sh stop "$SSHD_LOCAL_DIR"
# Everything lives in a new temporary folder (host key, the user's key, authorized_keys, both configs, the
# pid file): no system file or ~/.ssh is touched. sshd listens on 127.0.0.1 on a free port and takes only
# that key. Needs openssh-server (sshd) and openssh-client.
set -euo pipefail
case "${1:-}" in
start)
    dir=$(mktemp -d /tmp/gpuenv-sshd.XXXXXX)  # mode 0700, owned by this user
    sshd=$(command -v sshd || echo /usr/sbin/sshd)
    ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
    ssh-keygen -q -t ed25519 -N '' -f "$dir/user_key"
    cp "$dir/user_key.pub" "$dir/authorized_keys"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    user=$(id -un)
    cat >"$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $port
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers $user
UsePAM no
# the key files sit under /tmp (world-writable, which StrictModes refuses); the folder itself is 0700
StrictModes no
EOF
    cat >"$dir/ssh_config" <<EOF
Host localhost
    Port $port
    User $user
    IdentityFile $dir/user_key
    IdentitiesOnly yes
    BatchMode yes
    StrictHostKeyChecking no
    UserKnownHostsFile $dir/known_hosts
    LogLevel ERROR
EOF
    mkdir -p /run/sshd 2>/dev/null || true  # sshd's privilege-separation folder (made by the package's service)
    "$sshd" -f "$dir/sshd_config" -E "$dir/sshd.log"
    for _ in $(seq 50); do
        ssh -F "$dir/ssh_config" localhost true 2>/dev/null && break
        sleep 0.2
    done
    ssh -F "$dir/ssh_config" localhost true >&2 || { tail -5 "$dir/sshd.log" >&2; kill "$(cat "$dir/sshd.pid")"; exit 1; }
    echo "export SSHD_LOCAL_DIR=$dir GPUENV_TEST_SSH='-F $dir/ssh_config -p $port $user@localhost'"
    ;;
stop)
    dir=${2:?usage: sshd-local.sh stop DIR}
    [ -f "$dir/sshd.pid" ] && kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: sshd-local.sh start | stop DIR" >&2
    exit 2
    ;;
esac
