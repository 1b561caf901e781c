# SPDX-License-Identifier: GPL-2.0
# Shared helpers for the kvcache scripts. Source it; it defines functions
# and a few variables and runs nothing else.

KVC_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KVC_FRAGMENT=$KVC_TOP/scripts/kernel/kvcache-test.config
KVC_CACHE=${KVCACHE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/kvcache}
# Which test kernel: 6.12 (bookworm's linux-source-6.12, installed by
# make deps: every suite) or 7.3 (trixie-backports' linux-source-7.3,
# fetched into the cache by scripts/fetch-kernel-src: the upstream
# dma-buf and P2PDMA interfaces 6.12 lacks). KVC_KVER picks it.
KVC_KVER=${KVC_KVER:-6.12}
case $KVC_KVER in
6.12)
	KVC_SRC_PKG=linux-source-6.12
	KVC_SRC_TARBALL=/usr/src/linux-source-6.12.tar.xz
	KVC_FRAGMENTS=$KVC_FRAGMENT
	;;
7.3)
	KVC_SRC_PKG=linux-source-7.3
	KVC_SRC_DIR=$KVC_CACHE/src-7.3
	KVC_SRC_TARBALL=$KVC_SRC_DIR/usr/src/linux-source-7.3.tar.xz
	KVC_FRAGMENTS="$KVC_FRAGMENT $KVC_TOP/scripts/kernel/kvcache-test-7.config"
	;;
*)
	echo "KVC_KVER=$KVC_KVER: only 6.12 and 7.3 are test kernels" >&2
	exit 1
	;;
esac

kvc_die() {
	echo "${0##*/}: $*" >&2
	exit 1
}

kvc_log() {
	echo "${0##*/}: $*" >&2
}

# The test kernel is keyed by what it is built from: the Debian source
# package version, the config fragment's settings (not its comments), and
# the build recipe itself.
kvc_kernel_key() {
	local ver f
	if [ "$KVC_KVER" = 6.12 ]; then
		ver=$(dpkg-query -W -f='${Version}' "$KVC_SRC_PKG" 2>/dev/null) ||
			kvc_die "$KVC_SRC_PKG is not installed; run: make deps"
	else
		ver=$(cat "$KVC_SRC_DIR/.version" 2>/dev/null) ||
			kvc_die "$KVC_SRC_PKG is not fetched; run: scripts/fetch-kernel-src"
	fi
	{
		echo "$ver"
		for f in $KVC_FRAGMENTS; do
			grep -E '^(CONFIG_|# CONFIG_)' "$f"
		done
		cat "$KVC_TOP/scripts/build-kernel"
	} | sha256sum | cut -c1-16
}

# Directory of the cached test kernel build (may not exist yet).
kvc_kernel_dir() {
	echo "$KVC_CACHE/kernel-$KVC_KVER-$(kvc_kernel_key)"
}

# Succeeds when the cached kernel is complete.
kvc_kernel_ready() {
	[ -f "$(kvc_kernel_dir)/.kvcache-complete" ]
}

kvc_kernel_src() {
	echo "$(kvc_kernel_dir)/linux"
}
