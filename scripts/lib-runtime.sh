# shellcheck shell=bash
# Helpers for the phase-2 scripts (bench-runtime, demo): a pause-like image built locally
# without network, and a containerd on private paths that can be restarted by a program
# invoked as an argument vector (standing in for `systemctl restart containerd`).
# Source after scripts/lib.sh. Never touches /run/containerd or /var/lib/containerd.

# build_pause_oci DIR NAME -> writes DIR/pause.oci.tar, a one-layer OCI archive whose image
# is named NAME (io.containerd.image.name), holding a static binary that pauses.
build_pause_oci() {
    local d=$1 name=$2 w
    w=$(mktemp -d "$d/pause-build.XXXXXX")
    printf '#include <signal.h>\n#include <unistd.h>\nstatic void bye(int s){(void)s;_exit(0);}\nint main(void){signal(SIGTERM,bye);signal(SIGINT,bye);for(;;)pause();}\n' >"$w/pause.c"
    gcc -static -Os -s -o "$w/rootfs-pause" "$w/pause.c"
    mkdir -p "$w/rootfs" "$w/oci/blobs/sha256"
    mv "$w/rootfs-pause" "$w/rootfs/pause"
    tar --format=ustar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w/rootfs" -cf "$w/layer.tar" pause
    local ld cd md ls cs ms arch
    arch=$(dpkg --print-architecture)
    ld=$(sha256sum "$w/layer.tar" | cut -d' ' -f1); ls=$(stat -c %s "$w/layer.tar")
    cp "$w/layer.tar" "$w/oci/blobs/sha256/$ld"
    printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
        "$arch" "$ld" >"$w/config.json"
    cd=$(sha256sum "$w/config.json" | cut -d' ' -f1); cs=$(stat -c %s "$w/config.json")
    cp "$w/config.json" "$w/oci/blobs/sha256/$cd"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
        "$cd" "$cs" "$ld" "$ls" >"$w/manifest.json"
    md=$(sha256sum "$w/manifest.json" | cut -d' ' -f1); ms=$(stat -c %s "$w/manifest.json")
    cp "$w/manifest.json" "$w/oci/blobs/sha256/$md"
    printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$md" "$ms" "$name" "${name##*:}" >"$w/oci/index.json"
    printf '{"imageLayoutVersion":"1.0.0"}' >"$w/oci/oci-layout"
    tar --format=ustar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w/oci" -cf "$d/pause.oci.tar" oci-layout index.json blobs
    rm -rf "$w"
}

# write_containerd_config FILE ROOT STATE SOCKET SANDBOX_IMAGE
write_containerd_config() {
    local dir
    dir=$(dirname "$1")
    cat >"$1" <<TOML
version = 2
root = "$2"
state = "$3"
[grpc]
  address = "$4"
[ttrpc]
  address = "$4.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "$5"
TOML
}

# write_restart_program DIR CONFIG -> DIR/restart-containerd: stops the containerd whose PID
# is in DIR/containerd.pid (bounded), starts it again with --config CONFIG.
write_restart_program() {
    local d=$1 cfg=$2
    cat >"$d/restart-containerd" <<SH
#!/bin/sh
d='$d'
if [ -s "\$d/containerd.pid" ]; then
  pid=\$(cat "\$d/containerd.pid"); kill "\$pid" 2>/dev/null; n=0
  while [ -d /proc/\$pid ] && [ "\$(cut -d' ' -f3 /proc/\$pid/stat 2>/dev/null)" != Z ] && [ \$n -lt 200 ]; do sleep 0.05; n=\$((n+1)); done
  kill -9 "\$pid" 2>/dev/null
fi
setsid containerd --config '$cfg' >>"\$d/containerd.log" 2>&1 </dev/null &
echo \$! >"\$d/containerd.pid"
SH
    chmod 755 "$d/restart-containerd"
}

# wait_answering SOCKET [SECONDS]: until `ctr version` answers (bounded).
wait_answering() {
    local s=$1 limit=${2:-30} t0=$SECONDS
    until ctr --address "$s" version >/dev/null 2>&1; do
        [ $((SECONDS - t0)) -lt "$limit" ] || die "containerd did not answer on $s within ${limit}s"
        sleep 0.05
    done
}

# stop_containerd DIR: SIGTERM the containerd in DIR/containerd.pid, bounded, then SIGKILL.
stop_containerd() {
    local d=$1 pid n=0
    [ -s "$d/containerd.pid" ] || return 0
    pid=$(cat "$d/containerd.pid")
    kill "$pid" 2>/dev/null || true
    while [ -d "/proc/$pid" ] && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ] && [ $n -lt 200 ]; do
        sleep 0.05; n=$((n + 1))
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$d/containerd.pid"
}

# write_hygiene_containerd_config FILE ROOT STATE SOCKET SANDBOX_IMAGE RUNC_ROOT: as
# write_containerd_config, plus what kubelet's cgroupfs layout needs (testkit/src/
# workload.rs does the same): runc v2 with `SystemdCgroup = false` and its state under
# RUNC_ROOT (not the host's /run/containerd/runc). containerd 1.x (config version 2).
write_hygiene_containerd_config() {
    local cri='plugins."io.containerd.grpc.v1.cri"'
    write_containerd_config "$1" "$2" "$3" "$4" "$5"
    cat >>"$1" <<TOML
[$cri.containerd]
  default_runtime_name = "runc"
[$cri.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[$cri.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "$6"
TOML
}

# timings CMD... -> "median p95" in ms over $RUNS runs (after 2 warm-up runs); output and
# exit status of CMD ignored. (scripts/bench-runtime carries its own copy.)
timings() {
    local samples=() t0 t1
    for _ in 1 2; do "$@" >/dev/null 2>&1 || true; done
    for _ in $(seq "$RUNS"); do
        t0=$EPOCHREALTIME; "$@" >/dev/null 2>&1 || true; t1=$EPOCHREALTIME
        samples+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) * 1000 }')")
    done
    printf '%s\n' "${samples[@]}" | sort -n | awk '
        { v[NR] = $1 } END {
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            i = int(NR * 0.95 + 0.999); if (i > NR) i = NR
            printf "%.2f %.2f\n", m, v[i] }'
}

# peak_rss CMD... -> KiB (max over 5 runs, the largest process of the run: /usr/bin/time).
peak_rss() {
    local rss=0 k
    for _ in 1 2 3 4 5; do
        k=$(/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1)
        [[ $k =~ ^[0-9]+$ ]] && [ "$k" -gt "$rss" ] && rss=$k
    done
    echo "$rss"
}
