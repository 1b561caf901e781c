# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2154,SC2034
#
# The cluster's VMs, sourced by tests/vm-cluster-test (its correctness
# steps) and tests/vm-cluster-bench (make bench's g4-over-NFS figures):
# one NFS server and two nodes, each VM run by scripts/vm with
# tests/vm-cluster-guest inside.
#
#   server (eth0, eth1) --- link 1 --- node a (eth0)
#                       \-- link 2 --- node b (eth0)
#
# Each link is a QEMU socket netdev on this machine's 127.0.0.1 (the
# server's QEMU listens, a node's connects); inside, 169.254.<link>.1 is
# the server and 169.254.<link>.2 the node, link-local, no other route.
#
# The caller sets $top (the tree), $dir (the run directory, made anew
# by cluster_start) and $moddir (where kvcache.ko is), and may set
# $cluster_timeout (a node VM's limit in seconds, default 3600: node b
# lives through the whole cluster test, 25 minutes in a slow make check;
# the server's is 1800 more), and calls:
#
#   cluster_start SERVER_IMAGE_SIZE [CMD...]
#       checks the tools, makes the disk images, boots the server (CMD:
#       run on its export before it serves) and waits until it serves;
#       non-zero, with the reason in $cluster_why, when it does not.
#       Sets $p1 and $p2 (the links' ports) and $server (its pid).
#   node NAME BOOT LINK PORT ACTION...
#       one boot of a node; its exit status. Its results are moved to
#       $dir/NAME-bootBOOT/ (with rc, the status) when it ends.
#   relay &
#       copies every VM's /run/kvc/sig.* to the others, every 0.5 s.
#   cluster_stop
#       tells the server to stop (also done at exit) and waits for it;
#       the server VM's exit status.

# 64 KiB blocks, as the crash test's: TCG zeroes little per ALLOC.
cluster_modargs="block_size=65536 pool_size=4194304"
cluster_timeout=${cluster_timeout:-3600}
relay_pid=""
server=""

# A port nobody listens on now (QEMU binds it right after).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cluster_start() {
	local size=$1
	shift
	cluster_why=""
	if ! make -s "$top/build/crash/vm-crash-tool" \
		"$top/build/helper/kvcached" "$top/build/engine/kvc-engine" >&2
	then
		cluster_why="cannot build vm-crash-tool, kvcached and kvc-engine"
		return 1
	fi
	if [ ! -f "$moddir/kvcache.ko" ]; then
		cluster_why="no $moddir/kvcache.ko"
		return 1
	fi
	if ! command -v rpc.nfsd >/dev/null ||
	   ! command -v mount.nfs4 >/dev/null; then
		cluster_why="the NFS tools are missing: make deps"
		return 1
	fi
	rm -rf "$dir"
	mkdir -p "$dir/a" "$dir/b"
	truncate -s "$size" "$dir/server-nvme.img"
	truncate -s 512M "$dir/a-nvme.img" "$dir/b-nvme.img"
	p1=$(free_port)
	p2=$(free_port)
	[ "$p1" != "$p2" ] || p2=$(free_port)
	# However the caller ends, the server VM is told to stop (its guest
	# watches for the file), rather than left running until its timeout.
	trap '[ ! -d "$dir/server" ] || touch "$dir/server/stop"; [ -z "$relay_pid" ] || kill "$relay_pid" 2>/dev/null' EXIT
	scripts/vm --no-module --mac 1 --net "listen:$p1" --net "listen:$p2" \
		--nvme "$dir/server-nvme.img" --keep "$dir/server" \
		--timeout $((cluster_timeout + 1800)) \
		run -- tests/vm-cluster-guest server 2 "$@" \
		>"$dir/server.log" 2>&1 &
	server=$!
	for _ in $(seq 7200); do
		[ -e "$dir/server/ready" ] && break
		kill -0 "$server" 2>/dev/null || break
		sleep 0.5
	done
	if [ ! -e "$dir/server/ready" ]; then
		cluster_why="the NFS server did not come up: $(tail -n 5 "$dir/server.log")"
		return 1
	fi
}

node() {
	local name=$1 boot=$2 link=$3 port=$4 mac=$((10 + $3)) rc
	shift 4
	scripts/vm --module-dir "$moddir" --module-args "$cluster_modargs" \
		--mac "$mac" --net "connect:$port" --nvme "$dir/$name-nvme.img" \
		--keep "$dir/$name" --pidfile "$dir/$name.pid" --timeout "$cluster_timeout" \
		run -- tests/vm-cluster-guest node "$name" "$link" "$@" \
		>"$dir/$name-boot$boot.log" 2>&1
	rc=$?
	mkdir -p "$dir/$name-boot$boot"
	mv "$dir/$name/$name"-[0-9]*.txt "$dir/$name/$name"-[0-9]*.err \
		"$dir/$name-boot$boot/" 2>/dev/null
	echo "$rc" >"$dir/$name-boot$boot/rc"
	return "$rc"
}

relay() {
	local from to f
	while :; do
		for from in server a b; do
			for f in "$dir/$from"/sig.*; do
				[ -e "$f" ] || continue
				for to in server a b; do
					[ "$to" = "$from" ] || [ ! -d "$dir/$to" ] ||
						[ -e "$dir/$to/${f##*/}" ] ||
						touch "$dir/$to/${f##*/}"
				done
			done
		done
		sleep 0.5
	done
}

cluster_stop() {
	touch "$dir/server/stop"
	wait "$server"
}
