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
#   make man                    the man pages, from Documentation/ (pandoc:
#                               scripts/gen-man) -> build/man
#   make install [PREFIX=/usr/local]  install the library, its header,
#                               the tools, the systemd unit, the man pages
#                               and the docs (BINDIR, LIBDIR... override)
#   make packages               the Debian packages (kvcache-dkms, kvcached,
#                               libkvcache1, libkvcache-dev, python3-kvcache)
#                               and the Python wheel, lintian-checked, in
#                               build/pkg/ (Documentation/admin-guide/install.md)
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
#   make policy-bench           eviction policies against Belady on request
#                               traces, through kvcached and its simulator
#                               (scripts/bench policy: benchmarks.md)
#   make vm-shell               interactive shell in the test VM
#   make cluster-check          the cluster bench: an NFS server VM and two
#                               node VMs sharing g4 (tests/vm-cluster-test)
#   make fuzz-ioctl [FUZZ_SECONDS=600]  the ioctl fuzzer in the test VM by
#                               time (KASAN, lockdep, kmemleak)
#   make fuzz-parsers [FUZZ_SECONDS=20]  fuzz the wire format, block file,
#                               manifest, config, journal and namespace
#                               description parsers (libFuzzer);
#                               fuzz-parsers-replay: the seed corpus only
#   make clean

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD := $(TOP)/build

CC ?= cc
CSTD := -std=c11 -D_GNU_SOURCE
WARN := -Wall -Wextra -Werror
CFLAGS ?= -O2 -g
# Every object writes its header dependencies next to it (-MMD -MP), so
# touching one .c rebuilds one object and touching a header rebuilds the
# objects that include it, and nothing else.
DEPFLAGS := -MMD -MP
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	     -fno-omit-frame-pointer
# Link only the shared libraries a binary really calls into.
LDFLAGS ?= -Wl,--as-needed

KERNEL_DIR = $(shell $(TOP)/scripts/build-kernel --print-dir)
KSRC = $(KERNEL_DIR)/linux
# Built against the test kernel by default, where scripts/vm looks for it.
ifeq ($(origin KDIR),undefined)
MODULE_OUT ?= $(BUILD)/6.12
else
MODULE_OUT ?= $(BUILD)/module
endif
KDIR ?= $(KSRC)

# ---- where the sources are -----------------------------------------------
#
#   helper/common/      what every program shares: the wire format, keys,
#                       block files, manifests, the parents journal, the
#                       configuration, fault points, logging, the client
#   helper/kvcached/    the daemon: server loop, requests, namespaces,
#                       index, eviction policy, metrics;
#                       pool/ the pool behind one interface (kernel, memfd),
#                       tiers/ g3 and g4 (spill, promotion, scan, recovery)
#   helper/kvcachectl/  the admin tool
#   helper/libkvcache/  the client library; include/ is its public header
#   helper/engine/      the reference engine, a client of the library
#
# Each folder sees the headers of the folders below it in that list and no
# others: common/ sees only itself, the library does not see the daemon.
COMMON_SRCS := $(sort $(wildcard helper/common/*.c))
KVCD_SRCS := $(sort $(wildcard helper/kvcached/*.c helper/kvcached/pool/*.c \
	     helper/kvcached/tiers/*.c))
KVCD_LIB_SRCS := $(filter-out helper/kvcached/main.c,$(KVCD_SRCS))
CTL_SRCS := $(sort $(wildcard helper/kvcachectl/*.c))
LIB_SRCS := $(sort $(wildcard helper/libkvcache/*.c))
# The parts of common/ the library carries inside it (hidden).
LIB_COMMON_SRCS := helper/common/keys.c helper/common/proto.c \
		   helper/common/fdpass.c helper/common/fastidx.c \
		   helper/common/blockfile.c helper/common/beneath.c
ENGINE_SRCS := helper/engine/model.c helper/engine/engine.c

NL_CFLAGS := $(shell pkg-config --cflags libnl-genl-3.0 2>/dev/null)
COMMON_INC := -I$(TOP)/uapi -I$(TOP)/helper/common
KVCD_INC := $(COMMON_INC) -I$(TOP)/helper/kvcached \
	    -I$(TOP)/helper/kvcached/pool -I$(TOP)/helper/kvcached/tiers
LIB_INC := $(COMMON_INC) -I$(TOP)/helper/libkvcache/include \
	   -I$(TOP)/helper/libkvcache
ENGINE_INC := $(COMMON_INC) -I$(TOP)/helper/libkvcache/include \
	      -I$(TOP)/helper/engine
# Tests and benchmarks reach into every part.
TEST_INC := $(KVCD_INC) $(NL_CFLAGS) -I$(TOP)/helper/libkvcache/include \
	    -I$(TOP)/helper -I$(TOP)/helper/engine -I$(TOP)/tests/unit \
	    -I$(TOP)/tests/selftests -I$(TOP)/tests/bench

KVCD_LIBS := -lcrypto -lnl-genl-3 -lnl-3 -luring -lzmq -pthread
LIB_LIBS := -lcrypto -pthread

# Three object trees, one per way of compiling: $(BUILD)/obj (the
# programs and benchmarks), $(BUILD)/san/obj (ASan/UBSan, the unit tests),
# $(BUILD)/lib/obj (PIC with hidden visibility, the library). Each has
# one pattern rule; the folder a source is in picks its include path.
OBJ := $(BUILD)/obj
SAN := $(BUILD)/san/obj
LOBJ := $(BUILD)/lib/obj
OBJ_TREES := $(OBJ) $(SAN) $(LOBJ)

INC := $(TEST_INC)
$(addsuffix /helper/common/%.o,$(OBJ_TREES)): INC = $(COMMON_INC)
$(addsuffix /helper/kvcached/%.o,$(OBJ_TREES)): INC = $(KVCD_INC) $(NL_CFLAGS)
$(addsuffix /helper/kvcachectl/%.o,$(OBJ_TREES)): INC = $(COMMON_INC)
$(addsuffix /helper/libkvcache/%.o,$(OBJ_TREES)): INC = $(LIB_INC)
$(addsuffix /helper/engine/%.o,$(OBJ_TREES)): INC = $(ENGINE_INC)
# The unit tests know where the key vectors and the example config are.
$(SAN)/tests/unit/%.o: INC = $(TEST_INC) \
	-DKVC_KEY_VECTORS='"$(TOP)/tests/unit/key_vectors.txt"' \
	-DKVC_EXAMPLE_CONF='"$(TOP)/helper/kvcached/kvcached.conf"'

USER_CFLAGS = $(CSTD) $(WARN) $(CPPFLAGS) $(CFLAGS) $(INC)

$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(SAN)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(SAN_FLAGS) $(DEPFLAGS) -c -o $@ $<

$(LOBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -fPIC -fvisibility=hidden $(DEPFLAGS) -c -o $@ $<

# Archives: a binary pulls from them only the objects it needs.
objs = $(patsubst %.c,$(1)/%.o,$(2))

$(OBJ)/common.a: $(call objs,$(OBJ),$(COMMON_SRCS))
$(OBJ)/kvcached.a: $(call objs,$(OBJ),$(KVCD_LIB_SRCS))
$(SAN)/common.a: $(call objs,$(SAN),$(COMMON_SRCS))
$(SAN)/kvcached.a: $(call objs,$(SAN),$(KVCD_LIB_SRCS))
%.a:
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

.PHONY: all deps kernel module helper lib engine install pytest vllm-env \
	vllm-check unit unit-build selftests check demo soak bench bench-build \
	vm-shell clean packages man

all: helper lib engine unit-build

deps:
	$(TOP)/scripts/deps

kernel:
	$(TOP)/scripts/build-kernel

module:
	$(TOP)/scripts/build-module $(KDIR) $(MODULE_OUT)

# ---- the daemon and the admin tool ---------------------------------------

helper: $(BUILD)/helper/kvcachectl $(BUILD)/helper/kvcached

$(BUILD)/helper/kvcached: $(OBJ)/helper/kvcached/main.o $(OBJ)/kvcached.a \
			  $(OBJ)/common.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(KVCD_LIBS)

$(BUILD)/helper/kvcachectl: $(call objs,$(OBJ),$(CTL_SRCS)) $(OBJ)/common.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lcrypto

# ---- libkvcache: what engines link -----------------------------------------
#
# Built with hidden visibility and a version script (libkvcache.map): only
# the kvcache_* calls of include/libkvcache.h are exported, the common
# modules it carries (keys, proto, blockfile) stay private. The static
# library holds the same objects.
LIB_OBJS := $(call objs,$(LOBJ),$(LIB_SRCS) $(LIB_COMMON_SRCS))
LIB_MAP := helper/libkvcache/libkvcache.map
LIB_SONAME := libkvcache.so.1
# Where make install puts things (the Debian packages set them for /usr
# and the multiarch library directory: debian/rules).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/kvcache
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc

lib: $(BUILD)/lib/libkvcache.so $(BUILD)/lib/libkvcache.a \
     $(BUILD)/lib/libkvcache.pc $(BUILD)/lib/libkvcache-uninstalled.pc

$(BUILD)/lib/libkvcache.so: $(LIB_OBJS) $(LIB_MAP)
	$(CC) -shared -Wl,-soname,$(LIB_SONAME) -Wl,--no-undefined \
		-Wl,--version-script=$(LIB_MAP) $(LDFLAGS) \
		-o $(BUILD)/lib/$(LIB_SONAME) $(LIB_OBJS) $(LIB_LIBS)
	ln -sf $(LIB_SONAME) $@

$(BUILD)/lib/libkvcache.a: $(LIB_OBJS)

# pkg-config: the installed file, and the -uninstalled one pkg-config
# prefers when PKG_CONFIG_PATH holds build/lib (a build from the tree).
$(BUILD)/lib/libkvcache.pc: helper/libkvcache/libkvcache.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' $< >$@

$(BUILD)/lib/libkvcache-uninstalled.pc: helper/libkvcache/libkvcache.pc.in \
					Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(TOP)|' -e 's|@LIBDIR@|$(BUILD)/lib|' \
	    -e 's|@INCLUDEDIR@|$(TOP)/helper/libkvcache/include|' $< >$@

# ---- the reference engine ---------------------------------------------------

engine: $(BUILD)/engine/kvc-engine

$(BUILD)/engine/kvc-engine: $(call objs,$(OBJ),helper/engine/kvc-engine.c \
			    $(ENGINE_SRCS)) $(BUILD)/lib/libkvcache.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIB_LIBS) -lm

# ---- the man pages --------------------------------------------------------
#
# kvcached(8), kvcachectl(8), kvcached.conf(5) and libkvcache(3): each a
# front part in Documentation/man/ and the sections of the documents it
# names (scripts/gen-man), uncompressed. They point the reader to the
# Markdown documentation where make install puts it (DOCDIR).
man:
	$(TOP)/scripts/gen-man --docdir $(DOCDIR) $(BUILD)/man

# The configuration goes to $(SYSCONFDIR)/kvcache/ only where none is:
# an administrator's file is never overwritten (the packages make it a
# conffile). The unit gets its paths under PREFIX and DOCDIR.
install: helper lib man
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0644 $(BUILD)/lib/$(LIB_SONAME) $(DESTDIR)$(LIBDIR)/
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libkvcache.so
	install -m 0644 $(BUILD)/lib/libkvcache.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 helper/libkvcache/include/libkvcache.h \
		$(DESTDIR)$(INCLUDEDIR)/
	install -m 0644 $(BUILD)/lib/libkvcache.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0755 $(BUILD)/helper/kvcached $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(BUILD)/helper/kvcachectl $(DESTDIR)$(BINDIR)/
	install -m 0644 $(BUILD)/man/libkvcache.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 $(BUILD)/man/kvcached.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(BUILD)/man/kvcached.8 $(BUILD)/man/kvcachectl.8 \
		$(DESTDIR)$(MANDIR)/man8/
	cd Documentation && find . -name '*.md' -exec install -D -m 0644 {} \
		$(abspath $(DESTDIR))$(DOCDIR)/{} \;
	install -m 0644 helper/kvcached/kvcached.conf $(DESTDIR)$(DOCDIR)/
	test -e $(DESTDIR)$(SYSCONFDIR)/kvcache/kvcached.conf || \
		install -D -m 0644 helper/kvcached/kvcached.conf \
			$(DESTDIR)$(SYSCONFDIR)/kvcache/kvcached.conf
	sed -e 's|/usr/local/share/doc/kvcache/|$(DOCDIR)/|g' \
	    -e 's|/usr/local/sbin/|$(SBINDIR)/|g' \
	    -e 's|/usr/local/|$(PREFIX)/|g' helper/kvcached/kvcached.service \
		>$(DESTDIR)$(UNITDIR)/kvcached.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/kvcached.service

# ---- packages: the Debian packages and the Python wheel ---------------------
#
# scripts/packages builds them from a copy of the committed tree (plus
# what is changed in the work tree) in $(BUILD)/pkg, with dpkg-buildpackage
# and python -m build, and runs lintian: build/pkg/*.deb, build/pkg/*.whl.
packages:
	$(TOP)/scripts/packages

# ---- host unit tests (ASan/UBSan) ------------------------------------------
#
# tests/unit/test_*.c are the tests; the other .c files there are their
# shared support, compiled once. Every test links the sanitized archives
# of common/ and the daemon and takes what it calls.
UNIT_TESTS := $(notdir $(basename $(wildcard tests/unit/test_*.c)))
UNIT_SUPPORT := $(call objs,$(SAN),$(filter-out tests/unit/test_%.c, \
		$(wildcard tests/unit/*.c)))

unit-build: $(addprefix $(BUILD)/unit/,$(UNIT_TESTS))

# The reference engine's model is tested too: its own sources.
$(BUILD)/unit/test_model: $(SAN)/helper/engine/model.o
# And kvcachectl's p2pcheck.
$(BUILD)/unit/test_p2pcheck: $(SAN)/helper/kvcachectl/p2pcheck.o
# And the policy bench's trace loader and simulator.
$(BUILD)/unit/test_policy_sim: $(SAN)/tests/bench/trace.o \
			       $(SAN)/tests/bench/policy_sim.o

$(BUILD)/unit/%: $(SAN)/tests/unit/%.o $(UNIT_SUPPORT) $(SAN)/kvcached.a \
		 $(SAN)/common.a
	@mkdir -p $(@D)
	$(CC) $(SAN_FLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) \
		$(SAN)/kvcached.a $(SAN)/common.a $(KVCD_LIBS) -pthread -lm

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
		-m pytest -q -p no:cacheprovider test_connector.py test_kv_events.py \
		test_families.py test_serve.py

# ---- selftests (in the test VM, and some on the host) ----------------------
#
# The selftests use the kernel's kselftest_harness.h (GNU C), from the test
# kernel's source tree. Its macros compare int constants with unsigned
# values, leave parameters unused and setjmp around locals, hence the
# -Wno- flags. tests/selftests/*_test.c are the tests; the other .c files
# there are their shared support, compiled once into support.a. One
# recipe builds them all: ST_LINK_<test> names what a test links beyond
# the support and common/, ST_NEEDS_<test> what must be built before it
# runs (the daemon it starts, the engine).
SELFTESTS := $(notdir $(basename $(wildcard tests/selftests/*_test.c)))
ST_CFLAGS = -std=gnu11 $(WARN) -Wno-unused-parameter -Wno-sign-compare \
	    -Wno-clobbered -Wno-format-truncation $(CFLAGS) $(TEST_INC) \
	    -I$(KSRC)/tools/testing/selftests \
	    -DKVC_UNIT_FILE='"$(TOP)/helper/kvcached/kvcached.service"'
ST_OBJ := $(BUILD)/st-obj
ST_SUPPORT := $(patsubst tests/selftests/%.c,$(ST_OBJ)/%.o, \
	      $(filter-out %_test.c,$(wildcard tests/selftests/*.c)))
ST_DAEMON := $(BUILD)/helper/kvcached $(BUILD)/engine/kvc-engine
ST_WITH_LIB := libkvcache_test isolation_test soak_test
$(foreach t,$(ST_WITH_LIB),$(eval ST_LINK_$(t) := $(BUILD)/lib/libkvcache.a))
$(foreach t,kvcached_test tiers_test hostile_test crash_test faults_test engine_test \
	deploy_test $(ST_WITH_LIB),$(eval ST_NEEDS_$(t) := $(ST_DAEMON)))

selftests: $(addprefix $(BUILD)/selftests/,$(SELFTESTS))

kselftest_harness := $(KSRC)/tools/testing/selftests/kselftest_harness.h

$(kselftest_harness):
	@echo "selftests need the test kernel source: make kernel"; exit 1

$(ST_OBJ)/%.o: tests/selftests/%.c | $(kselftest_harness)
	@mkdir -p $(@D)
	$(CC) $(ST_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(ST_OBJ)/support.a: $(ST_SUPPORT)

.SECONDEXPANSION:
$(BUILD)/selftests/%: $(ST_OBJ)/%.o $(ST_OBJ)/support.a $$(ST_LINK_$$*) \
		      $(OBJ)/common.a | $$(ST_NEEDS_$$*)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lcrypto -pthread

# The guest's client of the whole-VM crash test (tests/vm-crash-test).
crash-tool: $(BUILD)/crash/vm-crash-tool

$(OBJ)/tests/vm-crash-tool.o: CSTD := -std=gnu11

$(BUILD)/crash/vm-crash-tool: $(OBJ)/tests/vm-crash-tool.o $(ST_OBJ)/support.a \
			      $(OBJ)/common.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lcrypto

# A long soak on the host, memfd mode: make soak SOAK_SECONDS=3600
# (SOAK_CLIENTS, SOAK_SAMPLE and SOAK_CSV are passed on when set).
SOAK_SECONDS ?= 180
soak: $(BUILD)/selftests/soak_test
	KVC_DAEMON_MODE=memfd SOAK_SECONDS=$(SOAK_SECONDS) $<

# libkvcache_test on the host under ASan and UBSan, with the library's
# sources compiled in (scripts/check runs this one in memfd mode).
$(BUILD)/san/st/%.o: tests/selftests/%.c | $(kselftest_harness)
	@mkdir -p $(@D)
	$(CC) $(ST_CFLAGS) $(SAN_FLAGS) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/san/libkvcache_test: $(BUILD)/san/st/libkvcache_test.o \
		$(patsubst tests/selftests/%.c,$(BUILD)/san/st/%.o, \
		$(filter-out %_test.c,$(wildcard tests/selftests/*.c))) \
		$(call objs,$(SAN),$(LIB_SRCS)) $(SAN)/common.a \
		| $(BUILD)/helper/kvcached
	@mkdir -p $(@D)
	$(CC) $(SAN_FLAGS) $(LDFLAGS) -o $@ $^ -lcrypto -pthread

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
FUZZ_FLAGS := $(CSTD) $(WARN) -O1 -g $(COMMON_INC) \
	      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	      -fno-omit-frame-pointer
FUZZ_HARNESSES := proto blockfile manifest config journal nsdesc
FUZZ_DEPS_proto := helper/common/proto.c
FUZZ_DEPS_blockfile := helper/common/blockfile.c helper/common/beneath.c
# manifest.c's writes go through the fault injection points (fault.h).
FUZZ_DEPS_manifest := helper/common/manifest.c helper/common/blockfile.c \
		      helper/common/beneath.c \
		      helper/common/fault.c
FUZZ_DEPS_config := helper/common/config.c
FUZZ_DEPS_journal := helper/common/journal.c helper/common/blockfile.c \
		     helper/common/beneath.c
FUZZ_DEPS_nsdesc := helper/common/nsdesc.c helper/common/blockfile.c \
		    helper/common/beneath.c

.PHONY: fuzz-parsers fuzz-parsers-build fuzz-parsers-replay fuzz-corpus

fuzz-parsers-build: $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_HARNESSES))

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $$(FUZZ_DEPS_$$*)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(DEPFLAGS) -o $@ $< $(FUZZ_DEPS_$*)

fuzz-parsers: fuzz-parsers-build
	$(TOP)/tests/fuzz/run-fuzzers $(BUILD)/fuzz $(FUZZ_SECONDS)

fuzz-parsers-replay: fuzz-parsers-build
	$(TOP)/tests/fuzz/run-fuzzers $(BUILD)/fuzz replay

$(BUILD)/fuzz/gen_corpus: $(OBJ)/tests/fuzz/gen_corpus.o $(OBJ)/common.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^

# Writes into the repository: run it by hand, then commit the result.
# The reproducers of fixed bugs (regress-*) are kept, not generated.
fuzz-corpus: $(BUILD)/fuzz/gen_corpus
	if [ -d $(TOP)/tests/fuzz/corpus ]; then \
		find $(TOP)/tests/fuzz/corpus -type f ! -name 'regress-*' -delete; fi
	$(BUILD)/fuzz/gen_corpus $(TOP)/tests/fuzz/corpus \
		helper/kvcached/kvcached.conf

# ---- the whole thing ------------------------------------------------------

check:
	$(TOP)/scripts/check

# VM=1: in the test VM, on kvcache.ko (scripts/demo).
demo:
	VM=$(VM) $(TOP)/scripts/demo

bench:
	$(TOP)/scripts/bench

.PHONY: policy-bench
policy-bench:
	$(TOP)/scripts/bench policy

bench-build: $(BUILD)/bench/pool_bench $(BUILD)/bench/p2p_bench \
	     $(BUILD)/bench/index_bench $(BUILD)/bench/socket_bench \
	     $(BUILD)/bench/tier_bench $(BUILD)/bench/recovery_bench \
	     $(BUILD)/bench/peer_bench $(BUILD)/bench/scale_bench \
	     $(BUILD)/bench/policy_bench \
	     $(BUILD)/helper/kvcached $(BUILD)/helper/kvcachectl \
	     $(BUILD)/engine/kvc-engine

# One recipe: BENCH_LINK_<bench> names the objects a benchmark links,
# BENCH_LIBS_<bench> its own shared libraries. The
# persistent tiers' benches link the tier code itself, as kvcached does;
# peer_bench and scale_bench go through libkvcache as an engine does. No
# sanitizers: they time it.
BENCH_LINK_peer_bench := $(BUILD)/lib/libkvcache.a
BENCH_LIBS_peer_bench := -lhiredis -llmdb
BENCH_LINK_scale_bench := $(OBJ)/helper/kvcached/index.o \
			  $(BUILD)/lib/libkvcache.a
BENCH_LINK_index_bench := $(OBJ)/helper/kvcached/index.o
BENCH_LINK_socket_bench := $(OBJ)/common.a
BENCH_LINK_tier_bench := $(OBJ)/kvcached.a $(OBJ)/common.a
BENCH_LINK_recovery_bench := $(OBJ)/kvcached.a $(OBJ)/common.a
# The policy bench's simulator runs the daemon's index and policy code.
BENCH_LINK_policy_bench := $(OBJ)/tests/bench/trace.o \
			   $(OBJ)/tests/bench/policy_sim.o $(OBJ)/kvcached.a \
			   $(OBJ)/common.a

$(BUILD)/bench/%: $(OBJ)/tests/bench/%.o $$(BENCH_LINK_$$*)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(BENCH_LIBS_$*) -luring -lcrypto -pthread

vm-shell:
	$(TOP)/scripts/vm shell

.PHONY: cluster-check
cluster-check: helper crash-tool engine
	@test -f $(MODULE_OUT)/kvcache.ko || \
		{ echo "cluster-check needs $(MODULE_OUT)/kvcache.ko: make module"; exit 1; }
	KVC_CLUSTER_MODULE_DIR=$(MODULE_OUT) $(TOP)/tests/vm-cluster-test

clean:
	rm -rf $(BUILD)

# The header dependencies every compile wrote (not under build/check or
# build/pkg*: the package test unpacks a whole Debian root there, whose
# /etc/*.d are directories).
-include $(shell find $(BUILD) \( -path '$(BUILD)/check' -o \
	 -path '$(BUILD)/pkg*' \) -prune -o -name '*.d' -type f -print \
	 2>/dev/null)
