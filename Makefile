# SPDX-License-Identifier: GPL-2.0
#
# kvcache top-level Makefile. The two commands a newcomer needs:
#   make demo    build what is needed and run the end-to-end demo (VM=1: in
#                the test VM, on kvcache.ko)
#   make check   every test suite; ends with "N passed, N failed"
#
# Other targets:
#   make deps                   install the Debian packages (as root)
#   make kernel                 build (or find cached) the 6.12 test kernel
#   make module [KDIR=dir]      build kvcache.ko (default KDIR: the test kernel,
#                               into build/6.12; else into build/module)
#   make helper                 build kvcached and kvcachectl
#   make lib                    build libkvcache (.so, .a, pkg-config file)
#   make engine                 build the reference engine, kvc-engine
#   make install [PREFIX=/usr/local]  install the library, its header,
#                               the tools, the systemd unit and the docs
#   make unit                   build and run the host unit tests (ASan/UBSan)
#   make pytest                 the Python binding's tests (a real kvcached)
#   make vllm-env               set up (or reuse) the venv with vLLM's CPU
#                               build and this tree's kvcache package; its
#                               last line is that venv's python
#   make vllm-check             the vLLM connector's tests in real vLLM
#   make selftests              build the in-VM selftests
#   make soak [SOAK_SECONDS=3600]  the soak: 64 clients on one kvcached
#                               (memfd mode, host), memory flat, no errors
#   make bench                  benchmarks (test VM and host) ->
#                               Documentation/benchmarks.md and its plots
#                               (KVC_BENCH_ONLY=... runs a part: scripts/bench)
#   make vm-shell               interactive shell in the test VM
#   make fuzz-ioctl [FUZZ_SECONDS=600]  the ioctl fuzzer in the test VM by
#                               time (KASAN, lockdep, kmemleak)
#   make fuzz-parsers [FUZZ_SECONDS=20]  fuzz the wire format, block file,
#                               manifest, config and journal parsers (libFuzzer);
#                               fuzz-parsers-replay: the seed corpus only
#   make clean

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD := $(TOP)/build

CC ?= cc
CSTD := -std=c11 -D_GNU_SOURCE
WARN := -Wall -Wextra -Werror
CFLAGS ?= -O2 -g
NL_CFLAGS := $(shell pkg-config --cflags libnl-genl-3.0 2>/dev/null)
USER_CFLAGS := $(CSTD) $(WARN) $(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper \
	       $(NL_CFLAGS)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	     -fno-omit-frame-pointer

KERNEL_DIR = $(shell $(TOP)/scripts/build-kernel --print-dir)
KSRC = $(KERNEL_DIR)/linux
# Built against the test kernel by default, where scripts/vm looks for it.
ifeq ($(origin KDIR),undefined)
MODULE_OUT ?= $(BUILD)/6.12
else
MODULE_OUT ?= $(BUILD)/module
endif
KDIR ?= $(KSRC)

HELPER_SRCS := helper/devinfo.c helper/keys.c helper/proto.c helper/config.c \
	       helper/client.c \
	       helper/metrics.c helper/mpool.c helper/kevents.c helper/index.c \
	       helper/policy.c helper/blockfile.c helper/tierio.c helper/tier.c \
	       helper/manifest.c helper/fault.c helper/journal.c helper/log.c
HELPER_LIBS := -lcrypto -lnl-genl-3 -lnl-3 -luring
# The daemon's own modules (the unit tests do not link them).
DAEMON_SRCS := helper/daemon.c helper/daemon_tiers.c helper/server.c \
	       helper/kdev.c
UNIT_TESTS := test_uapi test_devinfo test_keys test_proto test_config \
	      test_metrics test_mpool test_kevents test_index test_policy \
	      test_blockfile test_tier test_manifest test_model test_fault \
	      test_journal test_log
SELFTESTS := kvcache_dev_test bench_test pool_test ioctl_fuzz_test p2p_test \
	     kvcached_test tiers_test libkvcache_test engine_test soak_test \
	     crash_test fault_test isolation_test faults_test xfer_async_test \
	     deploy_test

.PHONY: all deps kernel module helper lib engine install pytest vllm-env vllm-check unit unit-build selftests check demo soak \
	bench bench-build vm-shell clean

all: helper lib engine unit-build

deps:
	$(TOP)/scripts/deps

kernel:
	$(TOP)/scripts/build-kernel

module:
	$(TOP)/scripts/build-module $(KDIR) $(MODULE_OUT)

# ---- userspace ------------------------------------------------------------

helper: $(BUILD)/helper/kvcachectl $(BUILD)/helper/kvcached

$(BUILD)/helper/kvcached: helper/kvcached.c $(DAEMON_SRCS) $(HELPER_SRCS) \
			  helper/*.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ helper/kvcached.c $(DAEMON_SRCS) \
		$(HELPER_SRCS) $(HELPER_LIBS)

$(BUILD)/helper/kvcachectl: helper/kvcachectl.c $(HELPER_SRCS) helper/*.h \
			    uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ helper/kvcachectl.c $(HELPER_SRCS) \
		$(HELPER_LIBS)

# ---- libkvcache: what engines link -----------------------------------------
#
# Built with hidden visibility: only the kvcache_* calls of libkvcache.h
# are exported, the helper modules it shares (keys, proto, blockfile) stay
# private. The static library holds the same objects.
LIB_SRCS := helper/libkvcache/conn.c helper/libkvcache/lib.c \
	    helper/libkvcache/blocks.c helper/libkvcache/async.c \
	    helper/libkvcache/region.c helper/keys.c helper/proto.c \
	    helper/blockfile.c
LIB_OBJS := $(patsubst %.c,$(BUILD)/lib/obj/%.o,$(LIB_SRCS))
LIB_LIBS := -lcrypto -pthread
LIB_SONAME := libkvcache.so.1
PREFIX ?= /usr/local

lib: $(BUILD)/lib/libkvcache.so $(BUILD)/lib/libkvcache.a \
     $(BUILD)/lib/libkvcache.pc $(BUILD)/lib/libkvcache-uninstalled.pc

$(BUILD)/lib/obj/%.o: %.c helper/*.h helper/libkvcache/*.h \
		      uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -I$(TOP)/helper/libkvcache -fPIC \
		-fvisibility=hidden -c -o $@ $<

$(BUILD)/lib/libkvcache.so: $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,$(LIB_SONAME) -Wl,--no-undefined \
		-o $(BUILD)/lib/$(LIB_SONAME) $(LIB_OBJS) $(LIB_LIBS)
	ln -sf $(LIB_SONAME) $@

$(BUILD)/lib/libkvcache.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

# pkg-config: the installed file, and the -uninstalled one pkg-config
# prefers when PKG_CONFIG_PATH holds build/lib (a build from the tree).
$(BUILD)/lib/libkvcache.pc: helper/libkvcache/libkvcache.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(PREFIX)/lib|' \
	    -e 's|@INCLUDEDIR@|$(PREFIX)/include|' $< >$@

$(BUILD)/lib/libkvcache-uninstalled.pc: helper/libkvcache/libkvcache.pc.in \
					Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(TOP)|' -e 's|@LIBDIR@|$(BUILD)/lib|' \
	    -e 's|@INCLUDEDIR@|$(TOP)/helper/libkvcache|' $< >$@

# ---- the reference engine ---------------------------------------------------

ENGINE_SRCS := helper/engine/model.c helper/engine/engine.c

engine: $(BUILD)/engine/kvc-engine

$(BUILD)/engine/kvc-engine: helper/engine/kvc-engine.c $(ENGINE_SRCS) \
			    helper/engine/*.h $(BUILD)/lib/libkvcache.a
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -I$(TOP)/helper/libkvcache -o $@ $< \
		$(ENGINE_SRCS) $(BUILD)/lib/libkvcache.a $(LIB_LIBS) -lm

install: helper lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(PREFIX)/sbin
	install -m 0755 $(BUILD)/lib/$(LIB_SONAME) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(LIB_SONAME) $(DESTDIR)$(PREFIX)/lib/libkvcache.so
	install -m 0644 $(BUILD)/lib/libkvcache.a $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 helper/libkvcache/libkvcache.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 $(BUILD)/lib/libkvcache.pc \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 0755 $(BUILD)/helper/kvcached $(DESTDIR)$(PREFIX)/sbin/
	install -m 0755 $(BUILD)/helper/kvcachectl $(DESTDIR)$(PREFIX)/bin/
	# The documentation the unit's Documentation= names, the example
	# configuration, and the unit with its paths under PREFIX.
	install -d $(DESTDIR)$(PREFIX)/share/doc/kvcache \
		$(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0644 Documentation/*.md helper/kvcached.conf \
		$(DESTDIR)$(PREFIX)/share/doc/kvcache/
	sed -e 's|/usr/local/|$(PREFIX)/|g' helper/kvcached.service \
		>$(DESTDIR)$(PREFIX)/lib/systemd/system/kvcached.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/kvcached.service

unit-build: $(addprefix $(BUILD)/unit/,$(UNIT_TESTS))

# The helper's modules are compiled once with the sanitizers and every
# unit test links them, so adding a test costs one compile, not eleven.
SAN_OBJS := $(patsubst helper/%.c,$(BUILD)/unit/obj/%.o,$(HELPER_SRCS))

$(BUILD)/unit/obj/%.o: helper/%.c helper/*.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) $(SAN_FLAGS) -c -o $@ $<

# The reference engine's model: its own sources, not the helper's.
$(BUILD)/unit/test_model: tests/unit/test_model.c tests/unit/tap.h \
			  helper/engine/model.c helper/engine/model.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) $(SAN_FLAGS) -I$(TOP)/tests/unit -o $@ $< \
		helper/engine/model.c -pthread -lm

$(BUILD)/unit/%: tests/unit/%.c tests/unit/tap.h tests/unit/scratch.h $(SAN_OBJS) helper/*.h \
		 uapi/linux/kvcache.h tests/unit/key_vectors.txt helper/kvcached.conf
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) $(SAN_FLAGS) -I$(TOP)/tests/unit \
		-DKVC_KEY_VECTORS='"$(TOP)/tests/unit/key_vectors.txt"' \
		-DKVC_EXAMPLE_CONF='"$(TOP)/helper/kvcached.conf"' -o $@ $< \
		$(SAN_OBJS) $(HELPER_LIBS)

unit: unit-build
	@for t in $(UNIT_TESTS); do $(BUILD)/unit/$$t || exit 1; done

# Debian's python3 is the one python3-pytest is installed for.
pytest: helper lib
	/usr/bin/python3 -m pytest -q $(TOP)/tests/python

# vLLM's CPU build in a venv outside the tree (scripts/vllm-env: cached,
# keyed by its pins), with this tree's kvcache package installed editable.
vllm-env:
	@$(TOP)/scripts/vllm-env

vllm-check: helper lib
	cd $(TOP)/tests/vllm && "$$($(TOP)/scripts/vllm-env | tail -n 1)" \
		-m pytest -q -p no:cacheprovider test_connector.py

# The selftests use the kernel's kselftest_harness.h (GNU C), from the test
# kernel's source tree. Its macros compare int constants with unsigned
# values, leave parameters unused and setjmp around locals, hence the
# -Wno- flags.
selftests: $(addprefix $(BUILD)/selftests/,$(SELFTESTS))

$(BUILD)/selftests/%: tests/selftests/%.c tests/selftests/*.h \
		      uapi/linux/kvcache.h
	@test -f $(KSRC)/tools/testing/selftests/kselftest_harness.h || \
		{ echo "selftests need the test kernel source: make kernel"; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered \
		$(CFLAGS) -I$(TOP)/uapi \
		-I$(KSRC)/tools/testing/selftests -o $@ $< -pthread

# The daemon's tests speak the real wire format and derive real keys, and
# start the daemon they test. They share kvcd_fixture.h, of which each uses
# a part (hence -Wno-unused-function); their paths are built under
# $TMPDIR and checked where it matters.
$(BUILD)/selftests/kvcached_test $(BUILD)/selftests/tiers_test \
$(BUILD)/selftests/crash_test $(BUILD)/selftests/faults_test \
$(BUILD)/selftests/engine_test $(BUILD)/selftests/deploy_test: \
		$(BUILD)/selftests/%: tests/selftests/%.c \
		tests/selftests/*.h helper/proto.c helper/keys.c \
		helper/blockfile.c helper/*.h uapi/linux/kvcache.h \
		$(BUILD)/helper/kvcached $(BUILD)/engine/kvc-engine
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered \
		-Wno-unused-function -Wno-format-truncation \
		-DKVC_UNIT_FILE='"$(TOP)/helper/kvcached.service"' \
		$(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper \
		-I$(KSRC)/tools/testing/selftests -o $@ $< helper/proto.c \
		helper/keys.c helper/blockfile.c -lcrypto -pthread

# The library's tests link it statically (it holds proto, keys and
# blockfile, which the fixture uses too).
$(BUILD)/selftests/libkvcache_test: tests/selftests/libkvcache_test.c \
		tests/selftests/*.h helper/*.h helper/libkvcache/libkvcache.h \
		uapi/linux/kvcache.h $(BUILD)/lib/libkvcache.a \
		$(BUILD)/helper/kvcached
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered \
		-Wno-unused-function -Wno-format-truncation \
		$(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper -I$(TOP)/helper/libkvcache \
		-I$(KSRC)/tools/testing/selftests -o $@ $< \
		$(BUILD)/lib/libkvcache.a -lcrypto -pthread

# Tenant isolation (socket, device, tier files, salts) uses the fixture's
# raw client and the library, linked statically.
$(BUILD)/selftests/isolation_test: tests/selftests/isolation_test.c \
		tests/selftests/*.h helper/*.h helper/libkvcache/libkvcache.h \
		uapi/linux/kvcache.h $(BUILD)/lib/libkvcache.a \
		$(BUILD)/helper/kvcached
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered \
		-Wno-unused-function -Wno-format-truncation \
		$(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper -I$(TOP)/helper/libkvcache \
		-I$(KSRC)/tools/testing/selftests -o $@ $< \
		$(BUILD)/lib/libkvcache.a -lcrypto -pthread

# The guest's client of the whole-VM crash test (tests/vm-crash-test).
crash-tool: $(BUILD)/crash/vm-crash-tool

$(BUILD)/crash/vm-crash-tool: tests/vm-crash-tool.c tests/selftests/kvc_client.h \
		tests/selftests/kvc_ioctl.h tests/selftests/crash_pattern.h \
		helper/proto.c helper/keys.c helper/*.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper \
		-I$(TOP)/tests/selftests -o $@ $< helper/proto.c helper/keys.c \
		-lcrypto

# The soak (64 client processes on one kvcached, tests/selftests/soak_test.c)
# links the library statically too.
$(BUILD)/selftests/soak_test: tests/selftests/soak_test.c \
		tests/selftests/*.h helper/*.h helper/libkvcache/libkvcache.h \
		uapi/linux/kvcache.h $(BUILD)/lib/libkvcache.a \
		$(BUILD)/helper/kvcached
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered \
		-Wno-unused-function -Wno-format-truncation \
		$(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper -I$(TOP)/helper/libkvcache \
		-I$(KSRC)/tools/testing/selftests -o $@ $< \
		$(BUILD)/lib/libkvcache.a -lcrypto -pthread

# A long soak on the host, memfd mode: make soak SOAK_SECONDS=3600
# (SOAK_CLIENTS, SOAK_SAMPLE and SOAK_CSV are passed on when set).
SOAK_SECONDS ?= 180
soak: $(BUILD)/selftests/soak_test
	KVC_DAEMON_MODE=memfd SOAK_SECONDS=$(SOAK_SECONDS) $<

# The same test on the host under ASan and UBSan, with the library's
# sources compiled in (scripts/check runs this one in memfd mode).
$(BUILD)/san/libkvcache_test: tests/selftests/libkvcache_test.c \
		tests/selftests/*.h helper/*.h helper/libkvcache/*.h \
		$(LIB_SRCS) uapi/linux/kvcache.h $(BUILD)/helper/kvcached
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered \
		-Wno-unused-function -Wno-format-truncation $(SAN_FLAGS) \
		$(CFLAGS) -I$(TOP)/uapi -I$(TOP)/helper -I$(TOP)/helper/libkvcache \
		-I$(KSRC)/tools/testing/selftests -o $@ $< $(LIB_SRCS) \
		-lcrypto -pthread

# ---- the ioctl fuzzer, long runs ------------------------------------------
#
# make fuzz-ioctl [FUZZ_SECONDS=1800]: ioctl_fuzz_test in the test VM (two
# CPUs; KASAN, lockdep, kmemleak) for that long, by time, not by calls. It
# passes when the fuzzer's own checks pass and the VM's exit status is 0
# (120: the kernel log has a report, see build/fuzz-ioctl-vm/console.log).
# FUZZ_SECONDS is shared with fuzz-parsers, whose 20 s default is too short
# here: 600 s unless given. KVC_FUZZ_SEED=... repeats a run's choices.
FUZZ_IOCTL_SECONDS = $(if $(filter command line environment,$(origin \
		     FUZZ_SECONDS)),$(FUZZ_SECONDS),600)

.PHONY: fuzz-ioctl
fuzz-ioctl: $(BUILD)/selftests/ioctl_fuzz_test
	@test -f $(MODULE_OUT)/kvcache.ko || \
		{ echo "fuzz-ioctl needs $(MODULE_OUT)/kvcache.ko: make module"; exit 1; }
	rm -rf $(BUILD)/fuzz-ioctl-vm
	$(TOP)/scripts/vm --kmemleak --acpi --module-dir $(MODULE_OUT) \
		--keep $(BUILD)/fuzz-ioctl-vm \
		--timeout $$(( $(FUZZ_IOCTL_SECONDS) + 900 )) run -- env \
		KVC_FUZZ_CALLS=0 KVC_FUZZ_SECONDS=$(FUZZ_IOCTL_SECONDS) \
		$(if $(KVC_FUZZ_SEED),KVC_FUZZ_SEED=$(KVC_FUZZ_SEED)) \
		$(BUILD)/selftests/ioctl_fuzz_test; \
	rc=$$?; case $$rc in \
	0) echo "fuzz-ioctl: passed, kernel log clean" ;; \
	120) echo "fuzz-ioctl: the kernel log has a report: $(BUILD)/fuzz-ioctl-vm/console.log" ;; \
	*) echo "fuzz-ioctl: failed (status $$rc; $(BUILD)/fuzz-ioctl-vm/console.log)" ;; \
	esac; exit $$rc

# ---- fuzz harnesses for the parsers ---------------------------------------
#
# libFuzzer needs clang. Each harness links the parser it fuzzes, built
# with the same coverage and sanitizer flags (tests/fuzz/*.c say what each
# checks). fuzz-parsers runs each for FUZZ_SECONDS from a copy of the
# committed seed corpus; fuzz-parsers-replay runs the corpus once (the
# regression check); fuzz-corpus regenerates the corpus with the real
# encoders (gen_corpus.c), to be committed.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 20
FUZZ_FLAGS := $(CSTD) $(WARN) -O1 -g -I$(TOP)/uapi -I$(TOP)/helper \
	      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	      -fno-omit-frame-pointer
FUZZ_HARNESSES := proto blockfile manifest config journal
FUZZ_DEPS_proto := helper/proto.c
FUZZ_DEPS_blockfile := helper/blockfile.c
# manifest.c's writes go through the fault injection points (fault.h).
FUZZ_DEPS_manifest := helper/manifest.c helper/blockfile.c \
		      $(wildcard helper/fault.c)
FUZZ_DEPS_config := helper/config.c
FUZZ_DEPS_journal := helper/journal.c helper/blockfile.c

.PHONY: fuzz-parsers fuzz-parsers-build fuzz-parsers-replay fuzz-corpus

fuzz-parsers-build: $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_HARNESSES))

.SECONDEXPANSION:
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/fuzz/fuzz_files.h \
		      $$(FUZZ_DEPS_$$*) helper/*.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_DEPS_$*)

fuzz-parsers: fuzz-parsers-build
	$(TOP)/tests/fuzz/run-fuzzers $(BUILD)/fuzz $(FUZZ_SECONDS)

fuzz-parsers-replay: fuzz-parsers-build
	$(TOP)/tests/fuzz/run-fuzzers $(BUILD)/fuzz replay

$(BUILD)/fuzz/gen_corpus: tests/fuzz/gen_corpus.c helper/proto.c \
			  helper/blockfile.c helper/manifest.c helper/config.c \
			  helper/journal.c helper/*.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< helper/proto.c helper/blockfile.c \
		helper/manifest.c helper/config.c helper/journal.c \
		$(wildcard helper/fault.c)

# Writes into the repository: run it by hand, then commit the result.
# The reproducers of fixed bugs (regress-*) are kept, not generated.
fuzz-corpus: $(BUILD)/fuzz/gen_corpus
	if [ -d $(TOP)/tests/fuzz/corpus ]; then \
		find $(TOP)/tests/fuzz/corpus -type f ! -name 'regress-*' -delete; fi
	$(BUILD)/fuzz/gen_corpus $(TOP)/tests/fuzz/corpus helper/kvcached.conf

# ---- the whole thing ------------------------------------------------------

check:
	$(TOP)/scripts/check

# VM=1: in the test VM, on kvcache.ko (scripts/demo).
demo:
	VM=$(VM) $(TOP)/scripts/demo

bench:
	$(TOP)/scripts/bench

bench-build: $(BUILD)/bench/pool_bench $(BUILD)/bench/p2p_bench \
	     $(BUILD)/bench/index_bench $(BUILD)/bench/socket_bench \
	     $(BUILD)/bench/tier_bench $(BUILD)/bench/recovery_bench \
	     $(BUILD)/bench/peer_bench $(BUILD)/bench/scale_bench \
	     $(BUILD)/helper/kvcached $(BUILD)/helper/kvcachectl \
	     $(BUILD)/engine/kvc-engine

# kvcache against its peers (Redis over hiredis, LMDB) and how it scales,
# through libkvcache as an engine uses it.
$(BUILD)/bench/peer_bench: tests/bench/peer_bench.c tests/bench/bench.h \
			   helper/libkvcache/libkvcache.h $(BUILD)/lib/libkvcache.a
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -I$(TOP)/helper/libkvcache -o $@ $< \
		$(BUILD)/lib/libkvcache.a -lhiredis -llmdb $(LIB_LIBS)

$(BUILD)/bench/scale_bench: tests/bench/scale_bench.c tests/bench/bench.h \
			    tests/bench/chained.h \
			    helper/index.c helper/index.h \
			    helper/libkvcache/libkvcache.h $(BUILD)/lib/libkvcache.a
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -I$(TOP)/helper/libkvcache -o $@ $< \
		helper/index.c $(BUILD)/lib/libkvcache.a $(LIB_LIBS)

$(BUILD)/bench/pool_bench: tests/bench/pool_bench.c uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $<

$(BUILD)/bench/p2p_bench: tests/bench/p2p_bench.c tests/selftests/*.h \
			  uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Itests/selftests -o $@ $<

$(BUILD)/bench/index_bench: tests/bench/index_bench.c tests/bench/bench.h \
			    tests/bench/chained.h \
			    helper/index.c helper/index.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< helper/index.c

$(BUILD)/bench/socket_bench: tests/bench/socket_bench.c helper/client.c \
			     helper/proto.c helper/keys.c helper/*.h \
			     uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< helper/client.c helper/proto.c \
		helper/keys.c -lcrypto -pthread

# The persistent tiers' benches link the tier code itself, as kvcached
# does (no sanitizers: they time it).
TIER_BENCH_SRCS := helper/blockfile.c helper/tierio.c helper/tier.c \
		   helper/index.c helper/policy.c helper/manifest.c helper/fault.c \
		   helper/log.c

$(BUILD)/bench/tier_bench $(BUILD)/bench/recovery_bench: \
		$(BUILD)/bench/%: tests/bench/%.c tests/bench/bench.h \
		$(TIER_BENCH_SRCS) helper/*.h uapi/linux/kvcache.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< $(TIER_BENCH_SRCS) -luring

vm-shell:
	$(TOP)/scripts/vm shell

clean:
	rm -rf $(BUILD)
