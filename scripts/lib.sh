# SPDX-License-Identifier: GPL-2.0
# Shared helpers for the kvcache scripts. Source it; it defines functions
# and a few variables and runs nothing else.

KVC_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KVC_FRAGMENT=$KVC_TOP/scripts/kernel/kvcache-test.config
KVC_SRC_PKG=linux-source-6.12
KVC_SRC_TARBALL=/usr/src/linux-source-6.12.tar.xz
KVC_CACHE=${KVCACHE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/kvcache}

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
	local ver
	ver=$(dpkg-query -W -f='${Version}' "$KVC_SRC_PKG" 2>/dev/null) ||
		kvc_die "$KVC_SRC_PKG is not installed; run: make deps"
	{
		echo "$ver"
		grep -E '^(CONFIG_|# CONFIG_)' "$KVC_FRAGMENT"
		cat "$KVC_TOP/scripts/build-kernel"
	} | sha256sum | cut -c1-16
}

# Directory of the cached test kernel build (may not exist yet).
kvc_kernel_dir() {
	echo "$KVC_CACHE/kernel-6.12-$(kvc_kernel_key)"
}

# Succeeds when the cached kernel is complete.
kvc_kernel_ready() {
	[ -f "$(kvc_kernel_dir)/.kvcache-complete" ]
}

kvc_kernel_src() {
	echo "$(kvc_kernel_dir)/linux"
}
