# weavegym: every target does its own set-up, so `make test` and `make demo` work on a fresh Debian 12.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
# Host packages: Xvfb and X clients for the agent tests (zenity is the GTK text widget, xclip an
# independent clipboard client, openbox a real EWMH window manager, python3-tk the Tk canvas the
# dot-matrix font test reads back), QEMU for the KVM probe and VMs, debootstrap and e2fsprogs for image
# builds, headless Chromium to check the HTML report renders, openssh for remote libvirt (libvirt's ssh
# transport; the tests run a private sshd as the far host). Icarus Verilog (6 MB): Weave-DevOps-6's model of
# its design is checked against the real simulator. GNU Chess (1 MB): Weave-Games-7's oracle program is checked
# against the real engine. sox (15 MB with its libraries): Weave-Data-7's measurement runs in the real sox.
APT_PACKAGES := python3-venv python3-tk xvfb x11-utils xauth xdotool zenity xclip openbox iverilog gnuchess sox \
	qemu-system-x86 qemu-utils debootstrap e2fsprogs \
	libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients libvirt-dev pkg-config gcc \
	chromium openssh-client openssh-server tini
LIBVIRTD := sh -c 'setsid tini -s -- libvirtd </dev/null >/dev/null 2>&1 &'
PROTO := protos/weavegym/agent/v1/agent.proto
GENERATED := agent_pb2.py agent_pb2.pyi agent_pb2_grpc.py

CACHE_DIR ?= $(HOME)/.cache/weavegym

.PHONY: help setup system-deps venv services image image-full protos check-protos lint test test-unit test-host test-vm \
	test-heavy test-full \
	validate-base \
	validate-full \
	demo bench clean

help:
	@echo "make test   - install everything needed, then run the test suite (unit, xvfb and vm tiers)"
	@echo "make test-unit - the unit tier only: no display, no libvirt, no image (seconds)"
	@echo "make test-host - the unit and xvfb tiers (no image); make test-vm - the VM tier (base image)"
	@echo "make demo   - install everything needed, then run the oracle and a random agent on one task, with reports"
	@echo "make bench  - the agent, VM and env benchmarks"
	@echo "make test-heavy - long multi-VM scenarios (Ray, killed and resumed runs) that make test leaves out"
	@echo "make test-full - also build the full (XFCE) image and run its smoke test"
	@echo "make validate-base - validate every base-image task 3 times, adversaries included; writes TASKS.md"
	@echo "make validate-full - validate every task 3 times on its image; writes TASKS.md"
	@echo "make protos - regenerate the gRPC stubs from $(PROTO)"

setup: system-deps venv services

# There is no systemd on the CI machines: start the libvirt daemons by hand when they are not running.
# libvirtd runs under `tini -s`, a child subreaper: QEMU processes are orphaned to it, not to PID 1, which
# on these machines reaps about 1.4 s late, and libvirt's destroy waits for the reap (every VM close, and
# every reset from a prepared state, paid it).
# /dev/kvm must be udev's root:kvm 0660: with a foreign group, libvirt's QEMU user cannot open it
# and libvirt re-probes QEMU for ~60 s on every domain start (measured here; see weavegym/ops/doctor.py).
services: system-deps
	@if [ -e /dev/kvm ] && [ "$$(stat -c %G /dev/kvm)" != kvm ]; then \
	  echo ">> /dev/kvm: group $$(stat -c %G /dev/kvm) -> kvm"; $(SUDO) chgrp kvm /dev/kvm; $(SUDO) chmod 660 /dev/kvm; fi
	@pgrep -x virtlogd >/dev/null || $(SUDO) virtlogd -d
	@pgrep -x libvirtd >/dev/null || $(SUDO) $(LIBVIRTD)
	@for i in $$(seq 1 100); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.1; done; \
	virsh -c qemu:///system version >/dev/null || { echo "libvirtd did not come up"; exit 1; }
	@echo ">> libvirtd is running"

# The base test image: built once, then reused from $(CACHE_DIR)/images (keyed by a hash of the recipe).
image: setup
	$(SUDO) $(VENV)/bin/weavegym image build --profile base --cache-dir $(CACHE_DIR)

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo ">> apt-get install$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo ">> system packages present"; fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,dev]'
	@touch $@

protos: venv
	$(PY) -m grpc_tools.protoc --proto_path=protos --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO)

# Fails when the committed stubs differ from what the pinned grpcio-tools generates.
check-protos: venv
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(PY) -m grpc_tools.protoc --proto_path=protos --python_out=$$tmp --pyi_out=$$tmp \
		--grpc_python_out=$$tmp $(PROTO) && \
	for f in $(GENERATED); do \
	  cmp -s $$tmp/weavegym/agent/v1/$$f weavegym/agent/v1/$$f || \
	    { echo "stale generated stub $$f: run 'make protos' and commit"; exit 1; }; \
	done; echo ">> generated stubs are up to date"

lint: venv
	$(VENV)/bin/ruff check .

# The fast tier: pure Python, no display, no libvirt, no image (tests marked `unit`; see tests/conftest.py).
test-unit: system-deps venv
	$(PY) -m pytest -q -m unit

# Two passes, to keep the total under 40 minutes on a fresh machine. The host tiers (unit, xvfb) need no
# image, so they run while the base image builds (on a fresh machine the build mostly waits on the Debian
# mirror), two files at a time, one per core: they are CPU-bound Python, Xvfb and Tk, and took 713 s one file
# at a time here. The VM tier runs one file at a time once the image is there: each VM has two TCG vCPUs, so
# a second VM would only halve both and push boots toward their deadlines. --durations lists the slowest
# tests of each pass: the VM tier is what to trim.
test: setup check-protos lint
	@$(MAKE) --no-print-directory -j2 test-host image
	@$(MAKE) --no-print-directory test-vm

# The host tiers alone (no libvirt, no image): what `make test` runs beside the image build.
test-host: setup
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(PY) -m pytest -q -m "(unit or xvfb) and not serial" -n 2 --dist loadfile \
		--durations=25

# The VM tier alone (needs the base image: built or reused). It first makes the host's prepared states (the
# booted desktop, and variant 0 of the tasks the VM tests play) with a long boot deadline, outside any test:
# tests whose subject is not the cold boot then start their VMs by a restore instead of a boot of their own,
# and no test's deadline has to cover the first boot on a busy machine. Cold boots stay tested where they are
# the subject (test_libvirt_vm, the env's default path in test_env_episode and test_env_gym, the wheel).
VM_TEST_TASKS := Weave-Productivity-1,Weave-DevOps-1,Weave-Design-1
test-vm: image
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) WEAVEGYM_BOOT_TIMEOUT_S=1200 $(VENV)/bin/weavegym prepare \
	  "$(VM_TEST_TASKS)" --variants 1
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(PY) -m pytest -q -m "vm and not full_image and not heavy" --durations=40

# Long multi-VM scenarios on the base image (Ray with a killed actor, a killed run resumed, a suite validation
# whose VM is killed and whose task runs again, an episode with the simulated user): about 9 minutes here. Left
# out of `make test` to keep CI well inside its time; run before touching the runner, Ray or validate.
test-heavy: image
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(PY) -m pytest -q -m heavy --durations=10

# The full-image suite: build the `full` image (XFCE and task apps) and boot it. Not part of CI's `make test`.
image-full: setup
	$(SUDO) $(VENV)/bin/weavegym image build --profile full --cache-dir $(CACHE_DIR)

test-full: image image-full
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(PY) -m pytest -q -m full_image

# Every task on each of VALIDATE_SEEDS (a different variant each), VALIDATE_REPEAT times per seed (the flake rate),
# and the TASKS.md table from those runs. validate-full is the suite's record: about 7 hours for 60 tasks on
# three seeds with two workers here, and resumable: run it again and it goes on from the runs its record holds,
# keeping those whose task code (the task's own modules and everything outside the suite) is unchanged. Those
# runs are in record/, a file per task committed beside TASKS.md (clean runs' evaluations trimmed to what the
# tables read; weavegym/ops/record_store.py): the record TASKS.md is made from, and a run that outlasts a sitting
# or a machine goes on from it in a fresh clone. Delete the folder to start over. Never beside `make test`: a VM
# test restarts libvirtd host-wide.
# validate-base needs only the base image; it rewrites the base tasks' files in record/ (the others stay as they
# are) and their rows of TASKS.md.
# VALIDATE_WORKERS tasks run at once, one VM each: 2 suits a 2-core host.
# --prepared-states makes each task's first reset restore the host's booted desktop instead of booting a VM
# (about 100 s less per task here; the first-reset column then measures a restore).
# Both redraw TASKS.svg from the TASKS.md they wrote, also after a violation (validate then exits 1, and so does make).
VALIDATE_SEEDS ?= 0 3 6
VALIDATE_REPEAT ?= 1
VALIDATE_WORKERS ?= 2
VALIDATE_FLAGS ?= --prepared-states --resume
VALIDATE_JSON ?= record
VALIDATE_ARGS = $(foreach seed,$(VALIDATE_SEEDS),--seed $(seed)) --repeat $(VALIDATE_REPEAT) \
	--workers $(VALIDATE_WORKERS) $(VALIDATE_FLAGS)
validate-base: image
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym validate 'Weave-*' --profile base $(VALIDATE_ARGS) \
		--json $(VALIDATE_JSON); status=$$?; \
	$(VENV)/bin/weavegym tasks --tasks-md TASKS.md --from-json $(VALIDATE_JSON) --keep TASKS.md \
		--measured-with "\`weavegym validate 'Weave-*' --profile base $(strip $(VALIDATE_ARGS))\` (the other rows as they were)"; \
	$(VENV)/bin/weavegym tasks --plot TASKS.svg --keep TASKS.md \
		--plot-note "make validate-base (seeds $(VALIDATE_SEEDS)) and, for full-image tasks, TASKS.md's earlier rows"; \
	exit $$status

validate-full: image image-full
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym validate 'Weave-*' $(VALIDATE_ARGS) \
		--json $(VALIDATE_JSON) --tasks-md TASKS.md; status=$$?; \
	$(VENV)/bin/weavegym tasks --plot TASKS.svg --keep TASKS.md --plot-note "make validate-full (seeds $(VALIDATE_SEEDS))"; \
	exit $$status

# The oracle and the random agent on one task, headless; results tables, HTML reports, VNC addresses.
DEMO_TASK ?= Weave-DevOps-1
DEMO_OUT ?= runs/demo
demo: setup image
	-WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym doctor
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym run --agent oracle --tasks $(DEMO_TASK) --out $(DEMO_OUT)/oracle
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym run --agent random --tasks $(DEMO_TASK) --max-steps 12 \
		--out $(DEMO_OUT)/random
	$(VENV)/bin/weavegym report $(DEMO_OUT)/oracle
	$(VENV)/bin/weavegym report $(DEMO_OUT)/random --export gif

bench: setup image
	$(VENV)/bin/weavegym bench agent --iterations 50
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym bench vm --resets 5 --libvirt-resets 1
	WEAVEGYM_CACHE_DIR=$(CACHE_DIR) $(VENV)/bin/weavegym bench env

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
