# edged — build, test, cross-compile and install.
#
# `make help` lists the targets. The two commands of the README:
#   make run     build and run the daemon on its embedded default config
#   make test    fetch ONNX Runtime, then go test -race ./... with it required
# CI (.ci/run) calls the same targets; docs/BUILD.md explains each one.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO       ?= go
MODULE   := github.com/edged-dev/edged
# Version stamped into the binary (runtime.Version): a release tag, else the
# commit, with -dirty when the tree has uncommitted changes.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOFLAGS_BUILD ?= -trimpath
LDFLAGS  ?=
GO_LDFLAGS = $(LDFLAGS) -X $(MODULE)/runtime.Version=$(VERSION)
# Extra build tags, e.g. TAGS=tensorrt for the TensorRT shim.
TAGS     ?=
TAGFLAG   = $(if $(strip $(TAGS)),-tags '$(TAGS)')

HOST_ARCH := $(shell $(GO) env GOARCH)
BIN      := bin

# --- ONNX Runtime (from the npm package onnxruntime-node; no scripts run) ---
ORT_VERSION ?= 1.30.0
ORT_DIR  := third_party/onnxruntime
# playwright-core drives Debian's chromium in the live preview page's test
# (npm downloads no browser: --ignore-scripts); git-ignored under .cache/.
PLAYWRIGHT_VERSION ?= 1.65.1
PLAYWRIGHT_DIR := .cache/playwright
ORT_LIB_amd64 := $(ORT_DIR)/amd64/libonnxruntime.so.1
ORT_LIB_arm64 := $(ORT_DIR)/arm64/libonnxruntime.so.1
ORT_LIB  := $(ORT_DIR)/$(HOST_ARCH)/libonnxruntime.so.1

# --- arm64 cross build against a glibc 2.31 sysroot (JetPack 5 and 6) ------
SYSROOT  ?= .sysroot/bullseye-arm64
SYSROOT_ABS = $(abspath $(SYSROOT))
CROSS_CC  ?= aarch64-linux-gnu-gcc
CROSS_CXX ?= aarch64-linux-gnu-g++
QEMU      ?= qemu-aarch64
MMDEBSTRAP ?= mmdebstrap
# What the arm64 targets need, as CMD=DEBIAN_PACKAGE for .ci/need (checked
# before anything runs): the cross compilers, mmdebstrap while the sysroot
# is not made yet, and qemu for the targets that run arm64 code.
NEED_CROSS = $(CROSS_CC)=gcc-aarch64-linux-gnu $(CROSS_CXX)=g++-aarch64-linux-gnu \
	$(if $(wildcard $(SYSROOT)/.edged-sysroot),,$(MMDEBSTRAP)=mmdebstrap)
NEED_QEMU = $(QEMU)=qemu-user
# Debian's cross gcc searches its own glibc 2.36 headers and crt files before
# any sysroot, so: -nostdinc and the sysroot's include dirs after gcc's own
# (stddef.h, arm_neon.h); the C++ headers of the sysroot's libstdc++ (gcc 10)
# first for C++; -B for crt1.o/crti.o; -L for libraries; --sysroot for ld so
# the absolute paths inside libc.so/libpthread.so (linker scripts) resolve
# inside the sysroot; -static-libgcc so no newer libgcc_s is needed; -ldl
# because glibc 2.31 keeps dlopen in libdl.
CROSS_GCC_INCLUDE = $(shell $(CROSS_CC) -print-file-name=include 2>/dev/null)
CROSS_CFLAGS = -O2 -g -nostdinc -isystem $(CROSS_GCC_INCLUDE) \
	-isystem $(SYSROOT_ABS)/usr/include/aarch64-linux-gnu -isystem $(SYSROOT_ABS)/usr/include
CROSS_CXXFLAGS = -O2 -g -nostdinc \
	-isystem $(SYSROOT_ABS)/usr/include/c++/10 \
	-isystem $(SYSROOT_ABS)/usr/include/aarch64-linux-gnu/c++/10 \
	-isystem $(SYSROOT_ABS)/usr/include/c++/10/backward \
	-isystem $(CROSS_GCC_INCLUDE) \
	-isystem $(SYSROOT_ABS)/usr/include/aarch64-linux-gnu -isystem $(SYSROOT_ABS)/usr/include
# TensorRT headers for TAGS=tensorrt cross builds (the Jetson's
# /usr/include/aarch64-linux-gnu, or a TensorRT tar's include/ folder).
CROSS_TENSORRT_INCLUDE ?=
CROSS_CXXFLAGS += $(if $(CROSS_TENSORRT_INCLUDE),-isystem $(abspath $(CROSS_TENSORRT_INCLUDE)))
CROSS_LDFLAGS = -Wl,--sysroot=$(SYSROOT_ABS) -static-libgcc \
	-B $(SYSROOT_ABS)/usr/lib/aarch64-linux-gnu \
	-L $(SYSROOT_ABS)/usr/lib/gcc/aarch64-linux-gnu/10 \
	-L $(SYSROOT_ABS)/usr/lib/aarch64-linux-gnu -L $(SYSROOT_ABS)/lib/aarch64-linux-gnu -ldl
CROSS_ENV = GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$(CROSS_CC) CXX=$(CROSS_CXX) \
	CGO_CFLAGS="$(CROSS_CFLAGS)" CGO_CXXFLAGS="$(CROSS_CXXFLAGS)" CGO_LDFLAGS="$(CROSS_LDFLAGS)"

# --- install layout ----------------------------------------------------------
DESTDIR  ?=
PREFIX   ?= /usr
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib/edged
UNITDIR  ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
DOCDIR   ?= $(PREFIX)/share/doc/edged
SYSCONFDIR ?= /etc
# Which build to install: the host's (bin/edged) or GOARCH=arm64 (bin/edged-linux-arm64).
INSTALL_ARCH ?= $(HOST_ARCH)
INSTALL_BIN = $(if $(filter $(HOST_ARCH),$(INSTALL_ARCH)),$(BIN)/edged,$(BIN)/edged-linux-$(INSTALL_ARCH))

# --- tests -------------------------------------------------------------------
GOTEST_FLAGS ?=
# Packages for test, test-nocgo, test-arm64, bench, hil (e.g. PKGS=./sensors/...).
PKGS     ?= ./...
ORT_ENV  = EDGED_ONNXRUNTIME_LIB=$(abspath $(ORT_LIB))
FUZZTIME ?= 15s
BENCH    ?= .
BENCHTIME ?= 1s
BENCH_COUNT ?= 1
BENCH_OUT ?= $(BIN)/bench-$(shell date -u +%Y%m%dT%H%M%SZ).txt
# Hardware-in-the-loop settings (make hil): every EDGED_HIL_* the tests read,
# found in the sources, so the list cannot go stale (docs/HIL.md explains them).
HIL_VARS = $(shell git ls-files -co --exclude-standard -- '*.go' 2>/dev/null | xargs -r grep -hoE 'EDGED_(HIL_[A-Z0-9_]+|REQUIRE_GPU|REQUIRE_ORT)' 2>/dev/null | sort -u)

.PHONY: help build run deps deps-go ort test check fmt-check vet tidy-check test-nocgo \
	sysroot cross-tools cross cross-selftest check-glibc test-arm64 install uninstall-hint bench generate generate-check \
	fuzz trt-check trt-check-all trt-test trt-makefile hil hil-arm64 systemd-verify clean \
	bench-tools bench-compare bench-share bench-batch soak deb deb-test playwright

help: ## list the targets
	@echo "edged $(VERSION) — make targets:"
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-15s %s\n", $$1, $$2}'
	@echo "Variables: VERSION=$(VERSION) ORT_VERSION=$(ORT_VERSION) SYSROOT=$(SYSROOT) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) TAGS=$(TAGS)"

# --- build -------------------------------------------------------------------
build: $(ORT_LIB) ## bin/edged (version stamped) + libonnxruntime.so.1 next to it
	@mkdir -p $(BIN)
	@# Said only when the Go build cache lacks the cgo packages (a first build).
	@if [[ -n "$$($(GO) list $(GOFLAGS_BUILD) $(TAGFLAG) -deps -f '{{if and .CgoFiles .Stale}}x{{end}}' ./cmd/edged 2>/dev/null)" ]]; then \
		echo "building $(BIN)/edged: the first build compiles the cgo parts (ONNX Runtime bindings, the CUDA and TensorRT loaders) and takes a few minutes; later builds take seconds"; fi
	$(GO) build $(GOFLAGS_BUILD) $(TAGFLAG) -ldflags '$(GO_LDFLAGS)' -o $(BIN)/edged ./cmd/edged
	install -m 0644 $(ORT_LIB) $(BIN)/libonnxruntime.so.1
	@echo "built $(BIN)/edged $(VERSION) ($(HOST_ARCH)) with ONNX Runtime $(ORT_VERSION) next to it"

run: build ## build, then run the daemon on its embedded default config
	$(BIN)/edged run $(ARGS)

# --- dependencies ------------------------------------------------------------
deps: ort deps-go ## ONNX Runtime for the host and arm64, and Go modules

ort: ## just the ONNX Runtime libraries (third_party/onnxruntime/{amd64,arm64})
	.ci/fetch-ort $(ORT_VERSION) $(ORT_DIR) amd64 arm64

deps-go:
	$(GO) mod download

playwright: ## playwright-core $(PLAYWRIGHT_VERSION) into .cache/playwright for the preview page's test in Debian's chromium (apt-get install chromium)
	@mkdir -p $(PLAYWRIGHT_DIR)
	cd $(PLAYWRIGHT_DIR) && npm install --no-save --ignore-scripts --no-audit --no-fund playwright-core@$(PLAYWRIGHT_VERSION)

$(ORT_DIR)/%/libonnxruntime.so.1:
	.ci/fetch-ort $(ORT_VERSION) $(ORT_DIR) $*

# --- tests -------------------------------------------------------------------
# go test -json through internal/testprogress: go test's own lines, every
# failure's whole output, and what is still running whenever nothing else
# was said for 20 s (cmd/edged alone runs for minutes).
test: deps ## README test command: go test -race ./... with ONNX Runtime required (progress every 20 s)
	$(ORT_ENV) EDGED_REQUIRE_ORT=1 $(GO) test -race -json $(GOTEST_FLAGS) $(PKGS) | $(GO) run ./internal/testprogress

check: fmt-check vet tidy-check test test-nocgo ## gofmt, vet, tidy, -race tests, CGO_ENABLED=0 tests

fmt-check: ## gofmt -l must list nothing
	@files=$$(git ls-files --cached --others --exclude-standard -- '*.go' | \
		while read -r f; do if [[ -f $$f ]]; then printf '%s\n' "$$f"; fi; done | xargs -r gofmt -l); \
	if [[ -n $$files ]]; then echo "gofmt: these files need 'gofmt -w':"; echo "$$files"; exit 1; fi; \
	echo "gofmt: clean"

vet: ## go vet (cgo, CGO_ENABLED=0, and arm64 without cgo)
	$(GO) vet $(TAGFLAG) ./...
	CGO_ENABLED=0 $(GO) vet $(TAGFLAG) ./...
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(TAGFLAG) ./...

tidy-check: ## go.mod/go.sum are tidy
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result"; exit 1; }

test-nocgo: ## go test ./... with CGO_ENABLED=0 (pure-Go stubs)
	CGO_ENABLED=0 $(GO) test $(GOTEST_FLAGS) $(PKGS)

# --- arm64 -------------------------------------------------------------------
sysroot: ## Debian bullseye arm64 sysroot (glibc 2.31) in .sysroot/ (skipped when up to date)
	@.ci/need "make sysroot" $(if $(wildcard $(SYSROOT)/.edged-sysroot),,$(MMDEBSTRAP)=mmdebstrap)
	MMDEBSTRAP=$(MMDEBSTRAP) .ci/mksysroot $(SYSROOT)

cross-tools:
	@.ci/need "make $(or $(filter cross cross-selftest test-arm64 hil-arm64,$(MAKECMDGOALS)),cross)" $(NEED_CROSS) \
		$(if $(filter cross-selftest test-arm64,$(MAKECMDGOALS)),$(NEED_QEMU))

cross: cross-tools sysroot $(ORT_LIB_arm64) ## bin/edged-linux-arm64 against the glibc 2.31 sysroot, then check-glibc
	@mkdir -p $(BIN)
	@# The cross flags make a line of 1,500 characters: said in short (make -n cross prints it whole).
	@echo "go build (arm64, cgo with $(CROSS_CC) against $(SYSROOT)) -o $(BIN)/edged-linux-arm64 ./cmd/edged"
	@$(CROSS_ENV) $(GO) build $(GOFLAGS_BUILD) $(TAGFLAG) -ldflags '$(GO_LDFLAGS)' -o $(BIN)/edged-linux-arm64 ./cmd/edged
	$(MAKE) check-glibc

cross-selftest: cross-tools sysroot ## build a C + C++ cgo program with the cross flags, check-glibc it, run it under qemu
	@mkdir -p $(BIN)
	cd .ci/crosscheck && $(CROSS_ENV) $(GO) build -o $(abspath $(BIN))/crosscheck-linux-arm64 .
	.ci/check-glibc $(BIN)/crosscheck-linux-arm64
	EDGED_QEMU_SYSROOT=$(SYSROOT_ABS) EDGED_QEMU=$(QEMU) .ci/qemu-exec $(BIN)/crosscheck-linux-arm64

check-glibc: ## highest GLIBC_/GLIBCXX_ needed by the arm64 build must be <= JetPack 5's
	.ci/check-glibc $(BIN)/edged-linux-arm64 $(ORT_LIB_arm64)

test-arm64: cross-tools sysroot $(ORT_LIB_arm64) ## unit tests cross-compiled for arm64, run under qemu-aarch64 (no -race)
	$(CROSS_ENV) EDGED_QEMU_SYSROOT=$(SYSROOT_ABS) EDGED_QEMU=$(QEMU) \
	EDGED_EXEC_WRAPPER=$(abspath .ci/qemu-exec) \
	EDGED_ONNXRUNTIME_LIB=$(abspath $(ORT_LIB_arm64)) EDGED_REQUIRE_ORT=1 \
	$(GO) test -exec $(abspath .ci/qemu-exec) -timeout 30m $(TAGFLAG) $(GOTEST_FLAGS) $(PKGS)

# --- install -----------------------------------------------------------------
# DESTDIR stages (packaging, or a tree to copy to a Jetson); PREFIX is where it
# lives on the target. Unit files name /usr/bin/edged and /usr/lib/edged: they
# are rewritten for another PREFIX. An existing edged.toml is never replaced.
install: $(ORT_DIR)/$(INSTALL_ARCH)/libonnxruntime.so.1 ## install binary, ORT library, units, sysusers/tmpfiles, default config (DESTDIR, PREFIX, INSTALL_ARCH)
	@test -x $(INSTALL_BIN) || { echo "install: $(INSTALL_BIN) missing: run 'make build' (or 'make cross' with INSTALL_ARCH=arm64) first"; exit 1; }
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSCONFDIR)/edged
	install -m 0755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/edged
	install -m 0644 $(ORT_DIR)/$(INSTALL_ARCH)/libonnxruntime.so.1 $(DESTDIR)$(LIBDIR)/libonnxruntime.so.1
	for u in edged.service edged.socket; do \
		sed -e 's#/usr/bin/edged#$(BINDIR)/edged#g' -e 's#/usr/lib/edged/#$(LIBDIR)/#g' \
			-e 's#/usr/share/doc/edged/#$(DOCDIR)/#g' -e 's#/etc/edged/#$(SYSCONFDIR)/edged/#g' \
			systemd/$$u >$(DESTDIR)$(UNITDIR)/$$u; \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u; \
	done
	install -m 0644 systemd/sysusers.d/edged.conf $(DESTDIR)$(SYSUSERSDIR)/edged.conf
	sed -e 's#/etc/edged#$(SYSCONFDIR)/edged#g' systemd/tmpfiles.d/edged.conf >$(DESTDIR)$(TMPFILESDIR)/edged.conf
	chmod 0644 $(DESTDIR)$(TMPFILESDIR)/edged.conf
	install -m 0644 docs/SYSTEMD.md $(DESTDIR)$(DOCDIR)/SYSTEMD.md
	@if [[ -e $(DESTDIR)$(SYSCONFDIR)/edged/edged.toml ]]; then \
		echo "install: keeping existing $(DESTDIR)$(SYSCONFDIR)/edged/edged.toml"; \
	elif [[ -f packaging/edged.toml ]]; then \
		install -m 0644 packaging/edged.toml $(DESTDIR)$(SYSCONFDIR)/edged/edged.toml; \
	else \
		echo "install: packaging/edged.toml missing (go generate ./configs makes it): no default config installed"; exit 1; \
	fi
	@echo "installed edged $(VERSION) ($(INSTALL_ARCH)) under $(DESTDIR)$(PREFIX). On the target, as root:"
	@echo "  systemd-sysusers edged.conf && systemd-tmpfiles --create edged.conf"
	@echo "  systemctl daemon-reload && systemctl enable --now edged.socket edged.service"

systemd-verify: ## systemd-analyze verify the units against a staged install (needs a built binary)
	.ci/systemd-verify

# --- Debian packages ----------------------------------------------------------
# dist/edged_<DEB_VERSION>_<arch>.deb made with nfpm (pinned in packaging/go.mod,
# its own module); DEB_VERSION is VERSION made Debian-shaped (.ci/mkdeb says how).
DIST     ?= dist
DEB_ARCHES ?= amd64 arm64
DEB_VERSION ?= $(shell .ci/mkdeb --version-of '$(VERSION)')
DEB_FILES = $(foreach a,$(DEB_ARCHES),$(DIST)/edged_$(DEB_VERSION)_$(a).deb)
# The host's arch from make build, another (arm64) from make cross.
DEB_PREREQS = $(if $(filter $(HOST_ARCH),$(DEB_ARCHES)),build) $(if $(filter-out $(HOST_ARCH),$(DEB_ARCHES)),cross) \
	$(foreach a,$(DEB_ARCHES),$(ORT_DIR)/$(a)/libonnxruntime.so.1)

deb: $(DEB_PREREQS) ## dist/edged_<version>_{amd64,arm64}.deb (DEB_ARCHES) with nfpm
	VERSION='$(VERSION)' DEB_VERSION='$(DEB_VERSION)' DIST=$(DIST) GO=$(GO) .ci/mkdeb $(DEB_ARCHES)

deb-test: deb ## make deb, then install/upgrade/remove/purge it in a bookworm root, lintian, arm64 contents and glibc (.ci/deb-test)
	VERSION='$(VERSION)' $(if $(wildcard $(SYSROOT)/.edged-sysroot),EDGED_QEMU_SYSROOT=$(SYSROOT_ABS)) .ci/deb-test $(DEB_FILES)

# --- benchmarks, generate, fuzz -------------------------------------------------
bench: ## Go benchmarks of all packages (-benchmem); output also in bin/bench-*.txt
	@mkdir -p $(BIN)
	$(ORT_ENV) $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -count $(BENCH_COUNT) $(TAGFLAG) $(PKGS) | tee $(BENCH_OUT)
	@echo "benchmark output: $(BENCH_OUT)"

# edged vs the Python loop of bench/ (bench/README.md). BENCH_BUILD=0 uses the
# binaries already in bin/ (a machine without Go); BENCH_ARGS go to benchcmp.
BENCH_INPUTS ?= $(BIN)/bench-inputs
BENCH_ARGS ?=
BENCH_BUILD ?= 1
BENCH_PYTHONS ?= python3 /usr/bin/python3

bench-tools: ## bin/benchgen, bin/benchcmp and bin/batchbench, static (CGO_ENABLED=0): they run without Go
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/benchgen ./bench/cmd/benchgen
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/benchcmp ./bench/cmd/benchcmp
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/batchbench ./bench/cmd/batchbench

bench-compare: $(if $(filter 1,$(BENCH_BUILD)),build bench-tools) ## edged vs a Python OpenCV/NumPy/onnxruntime loop on the same inputs: bin/bench-report/ (bench/README.md)
	@for p in $(BENCH_PYTHONS); do if $$p -c 'import cv2, numpy' 2>/dev/null; then exit 0; fi; done; \
		echo "bench-compare: no Python with cv2 and numpy ($(BENCH_PYTHONS)); on Debian: apt-get install python3-opencv python3-numpy"; exit 1
	@test -f $(BENCH_INPUTS)/inputs.json || $(BIN)/benchgen -o $(BENCH_INPUTS)
	$(BIN)/benchcmp -inputs $(BENCH_INPUTS) -edged $(BIN)/edged $(BENCH_ARGS)

# Resident memory of N pipelines on one model, shared against one engine per
# pipeline, in one run (bench/cmd/sharebench/doc.go; docs/PERFORMANCE.md).
SHARE_ARGS ?=
bench-share: ## RSS of 1, 2, 4, 8 pipelines on one model: shared vs one engine each, and the frame-pool bound
	$(ORT_ENV) $(GO) run ./bench/cmd/sharebench $(SHARE_ARGS)

# N replay cameras on one model through bin/edged, in one run: an engine per
# camera, one engine shared by a pipeline per camera, one batched pipeline
# (bench/cmd/batchbench/doc.go; docs/PERFORMANCE.md). BENCH_BUILD=0 uses the
# binaries already in bin/; BATCH_ARGS go to batchbench.
BATCH_ARGS ?=
bench-batch: $(if $(filter 1,$(BENCH_BUILD)),build bench-tools) ## results/s, p50/p99 total and RSS of 1, 2, 4, 8 cameras: own engines, shared, batched; memory and fairness bounds: bin/batch-report/
	$(BIN)/batchbench -edged $(BIN)/edged $(BATCH_ARGS)

# The soak of issue 10 (docs/OPERATIONS.md, fault 24; bench/cmd/soak/doc.go):
# bin/edged under model, SIGHUP, reload, client and pty churn, an MQTT
# broker stopped and started again and a replayed recording replaced under
# it, for SOAK_DURATION; fails unless RSS, fds and goroutines stay flat,
# every churn step gets its answer and every MQTT record arrives. Needs
# mosquitto (SOAK_ARGS=-mqtt=false without). SOAK_ARGS go to bin/soak
# (bin/soak -h).
SOAK_DURATION ?= 10m
SOAK_ARGS ?=
SOAK_OUT ?= $(BIN)/soak-report/$(shell date -u +%Y%m%dT%H%M%SZ)

soak: build ## edged under reload, SIGHUP, client, pty, MQTT broker and recording churn for SOAK_DURATION (10m); fails unless RSS, fds, goroutines stay flat
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/soak ./bench/cmd/soak
	@rc=0; $(BIN)/soak -edged $(BIN)/edged -duration $(SOAK_DURATION) -out $(SOAK_OUT) $(SOAK_ARGS) || rc=$$?; \
		echo "soak report: $(SOAK_OUT)/ (summary.txt, soak.png, samples.csv, edged.log)"; exit $$rc

generate: ## go generate ./... (CI fails when this changes the tree)
	$(GO) generate ./...

generate-check: ## generate, then fail if the tree changed
	@before=$$(git status --porcelain); \
	$(MAKE) generate; \
	after=$$(git status --porcelain); \
	if [[ "$$before" != "$$after" ]]; then \
		echo "go generate changed the tree: commit the regenerated files"; git status --short; git diff --stat; exit 1; \
	fi; echo "generate: no drift"

fuzz: ## run every Fuzz target for FUZZTIME each (default 15s)
	.ci/fuzz-smoke $(FUZZTIME)

# --- hardware ------------------------------------------------------------------
# TensorRT headers: JetPack's folder by default, or a TensorRT tag's include/
# (docs/TENSORRT.md). Passed as an absolute path: make -C changes folder.
TENSORRT_INCLUDE ?= /usr/include/aarch64-linux-gnu
TRT_MAKE = $(MAKE) -C trt/tensorrt
trt-check: trt-makefile ## TensorRT shim checks against real headers (TENSORRT_INCLUDE=DIR, default JetPack's)
	$(TRT_MAKE) check TENSORRT_INCLUDE=$(abspath $(TENSORRT_INCLUDE))

trt-check-all: trt-makefile ## trt-check for every third_party/TensorRT-*/include and .cache/TensorRT-*/include
	$(TRT_MAKE) check-all

trt-test: trt-makefile ## go test -tags tensorrt with the fake libnvinfer (needs 10.3 headers)
	$(TRT_MAKE) test TENSORRT_INCLUDE=$(abspath $(TENSORRT_INCLUDE))

trt-makefile:
	@if [[ ! -f trt/tensorrt/Makefile ]]; then \
		echo "trt-check: trt/tensorrt/Makefile is missing: the TensorRT shim has no 'check' target yet"; exit 1; \
	fi

hil: ## hardware-in-the-loop tests (-tags hil) on a Jetson; devices from EDGED_HIL_* env
	@for v in $(HIL_VARS); do printf '  %-22s %s\n' "$$v" "$${!v:-(unset)}"; done
	$(ORT_ENV) $(GO) test -tags 'hil $(TAGS)' -count=1 -timeout 60m $(GOTEST_FLAGS) $(PKGS)

hil-arm64: cross-tools sysroot ## cross-compile every package's tests with -tags hil into bin/hil-arm64/ (run them on the Jetson)
	@mkdir -p $(BIN)/hil-arm64
	for p in $$($(GO) list -tags 'hil $(TAGS)' -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $(PKGS)); do \
		name=$${p#$(MODULE)}; name=$${name#/}; name=$${name:-edged}; \
		$(CROSS_ENV) $(GO) test -c -tags 'hil $(TAGS)' -o $(BIN)/hil-arm64/$${name//\//_}.test $$p; \
	done
	.ci/check-glibc $(BIN)/hil-arm64/*.test
	@echo "copy bin/hil-arm64/ and third_party/onnxruntime/arm64/libonnxruntime.so.1 to the Jetson; run each"
	@echo "X.test from X's folder of a checkout there (testdata), with EDGED_HIL_* and EDGED_ONNXRUNTIME_LIB set"

clean: ## remove bin/ and dist/ (keeps third_party/, .sysroot/ and .cache/)
	rm -rf $(BIN) $(DIST)
