"""Host-wide prepared states (LibvirtConfig.prepared_states): the store, and real VMs restored from it.

The VM tests keep their states in a cache folder of their own (the built base image is pointed at with
``image_dir``), so they build the boot state themselves and prove that a second VM restores it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from weavegym.core.errors import AgentAuthError, AgentUnavailableError, SnapshotError
from weavegym.machine.backends.domain_xml import DomainSpec, domain_xml
from weavegym.machine.backends.prepared_states import (
    DEVICE_STATE,
    DISK,
    META,
    RAM_FILE,
    PreparedStore,
    _disk_usage,
    stale_states,
)

QEMU_ARG = "{http://libvirt.org/schemas/domain/qemu/1.0}arg"


def _fill(folder: Path) -> None:
    for name in (RAM_FILE, DEVICE_STATE, DISK):
        (folder / name).write_bytes(name.encode())


def test_a_state_is_published_whole_and_read_only(tmp_path: Path) -> None:
    store = PreparedStore(tmp_path / "states")
    assert store.find("ready") is None
    with store.building("ready", 5) as build:
        assert build.existing is None
        _fill(build.staging)
        assert store.find("ready") is None  # not visible while it is being built
        state = build.publish(b"payload", {"why": "test"})
    assert store.find("ready") == state and state.payload() == b"payload"
    assert state.meta()["why"] == "test" and store.names() == ["ready"]
    assert {oct(p.stat().st_mode & 0o777) for p in state.folder.iterdir()} == {"0o400"}
    with store.building("ready", 5) as again:  # a later builder finds it and builds nothing
        assert again.existing == state and not again.staging.exists()


def test_an_unpublished_build_leaves_nothing_and_missing_parts_refuse_to_publish(tmp_path: Path) -> None:
    store = PreparedStore(tmp_path / "states")
    with pytest.raises(RuntimeError), store.building("task-x", 5) as build:
        (build.staging / RAM_FILE).write_bytes(b"half")
        raise RuntimeError("the setup failed")
    assert store.find("task-x") is None and not any(p.name.startswith(".task-x.staging") for p in store.root.iterdir())
    with store.building("task-x", 5) as build, pytest.raises(FileNotFoundError, match=r"device\.state"):
        (build.staging / RAM_FILE).write_bytes(b"only the RAM")
        build.publish(b"", {})
    for bad in ("", "../etc", ".hidden", "a/b"):
        with pytest.raises(ValueError):
            store.find(bad)


def test_a_build_without_room_for_the_guest_s_memory_is_refused_before_it_starts(tmp_path: Path) -> None:
    store = PreparedStore(tmp_path / "states", min_free_bytes=1 << 60)
    with pytest.raises(SnapshotError, match="free"), store.building("ready", 5):
        pass
    assert store.names() == [] and not list(store.root.glob(".*staging*"))


def test_gc_finds_the_states_of_removed_images_and_dead_builders(tmp_path: Path) -> None:
    images, states = tmp_path / "images", tmp_path / "states"
    (images / "base-kept").mkdir(parents=True)
    shape = states / "base-kept" / "2048m-2c-1280x720"
    (shape / "ready").mkdir(parents=True)
    (shape / ".task-1.staging-999999999").mkdir()
    (shape / f".task-2.staging-{os.getpid()}").mkdir()  # a live builder: this process
    (states / "base-removed" / "2048m-2c-1280x720" / "ready").mkdir(parents=True)
    assert sorted(stale_states(states, images)) == sorted([shape / ".task-1.staging-999999999",
                                                           states / "base-removed"])


def _publish(store: PreparedStore, name: str, size: int, used_at: float) -> None:
    with store.building(name, 5) as build:
        _fill(build.staging)
        (build.staging / RAM_FILE).write_bytes(os.urandom(size))  # random: no filesystem stores it smaller
        build.publish(b"", {})
    store.hold(name).release()  # a use at ``used_at``: eviction ranks by the use file's time
    os.utime(store.root / f".{name}.use", (used_at, used_at))


def _hold_in_another_process(root: str, name: str, held: multiprocessing.synchronize.Event,
                             done: multiprocessing.synchronize.Event) -> None:
    hold = PreparedStore(Path(root)).hold(name)
    held.set()
    done.wait(30)
    hold.release()


def test_a_new_state_makes_room_by_removing_the_least_recently_used_unheld_ones(tmp_path: Path) -> None:
    """Every task variant an env plays leaves a state behind (about 1 GiB): the store stays within max_bytes,
    removing the oldest-used first, but never the booted desktop, a state a VM holds, or one being built."""
    mib, slack = 1 << 20, 1 << 16  # slack: each state's small files (device state, disk, meta)
    store = PreparedStore(tmp_path / "states", min_free_bytes=mib, max_bytes=4 * mib + slack)
    _publish(store, "ready", 3 * mib, used_at=100)  # the oldest, and the largest: still never removed
    for i, name in enumerate(("task-a", "task-b", "task-c")):
        _publish(store, name, mib, used_at=200 + i)
    assert store.names() == ["ready", "task-a", "task-b", "task-c"]
    ctx = multiprocessing.get_context("fork")
    held, done = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_in_another_process, args=(str(store.root), "task-a", held, done))
    holder.start()
    try:
        assert held.wait(20)
        # 3 MiB of task states and 1 MiB more to come fit in 4 MiB: nothing goes.
        assert store.make_room(mib) == []
        # Two more MiB: task-a is the least recently used but a VM holds it, so b and c go.
        assert store.make_room(3 * mib) == ["task-b", "task-c"]
        assert store.names() == ["ready", "task-a"]
    finally:
        done.set()
        holder.join(20)
    _publish(store, "task-d", mib, used_at=300)
    own = store.hold("task-d")  # this process's own hold protects it too
    bigger = PreparedStore(store.root, min_free_bytes=3 * mib, max_bytes=store.max_bytes)  # expects 3 MiB states
    with bigger.building("task-e", 5) as build:  # building makes room for itself: task-a, no longer held, goes
        assert store.names() == ["ready", "task-d"]
        _fill(build.staging)
        build.publish(b"", {})
    own.release()
    assert store.names() == ["ready", "task-d", "task-e"]
    assert not list(store.root.glob(".*evicted*")) and not list(store.root.glob(".*staging*"))
    assert PreparedStore(tmp_path / "states").make_room(1 << 40) == []  # no max_bytes: no bound
    assert store.hold("task-e") is not None and store.find("task-e") is not None


def test_folders_being_evicted_or_published_by_another_process_are_not_states(tmp_path: Path) -> None:
    """Two validation workers share a store: while one evicts a state (renamed, then removed) or publishes one
    (its meta written in the staging folder, then renamed), the other's make_room lists the store. It once took
    the evicted folder for a state and failed its task with "not a state name"."""
    mib = 1 << 20
    store = PreparedStore(tmp_path / "states", min_free_bytes=mib)
    for i, name in enumerate(("task-a", "task-b")):
        _publish(store, name, mib, used_at=100 + i)
    store.max_bytes = 2 * mib
    (store.root / "task-a").rename(store.root / ".task-a.evicted-4242")  # mid-eviction by another process
    staging = store.root / ".task-c.staging-4243"  # mid-publication by another process
    staging.mkdir()
    _fill(staging)
    (staging / META).write_text("{}")
    assert store.names() == ["task-b"]
    assert store.make_room(2 * mib) == ["task-b"]
    assert (store.root / ".task-a.evicted-4242").is_dir() and staging.is_dir(), "other processes' folders stay"
    assert _disk_usage(store.root / "gone") == 0


def _build_slowly(root: str, started: multiprocessing.synchronize.Event) -> None:
    store = PreparedStore(Path(root))
    with store.building("ready", 30) as build:
        started.set()
        time.sleep(1.5)  # holding the lock while "booting", as a real builder does for minutes
        _fill(build.staging)
        build.publish(b"from the first builder", {})


def test_two_processes_never_build_one_state_twice(tmp_path: Path) -> None:
    root = tmp_path / "states"
    started = multiprocessing.get_context("fork").Event()
    first = multiprocessing.get_context("fork").Process(target=_build_slowly, args=(str(root), started))
    first.start()
    assert started.wait(20)
    store = PreparedStore(root)
    with store.building("ready", 30) as build:  # waits for the first builder's lock
        assert build.existing is not None, "the second builder must see the first one's state"
        assert build.existing.payload() == b"from the first builder"
    first.join(20)
    assert first.exitcode == 0
    with pytest.raises(SnapshotError, match="building state"):
        blocker = multiprocessing.get_context("fork").Process(target=_build_slowly, args=(str(root / "b"), started))
        started.clear()
        blocker.start()
        assert started.wait(20)
        try:
            with PreparedStore(root / "b").building("ready", 0.3):
                pass
        finally:
            blocker.join(20)


def test_the_domain_maps_the_state_s_ram_and_waits_for_its_device_state() -> None:
    spec = DomainSpec(name="weavegym-1-abc", domain_type="qemu", memory_mib=2048, vcpus=2, kernel="/k",
                      initrd="/i", disk="/d.qcow2", console_log="/c.log", vnc_port=5911, vnc_password="pw123456",
                      agent_host_port=17611, agent_guest_port=760, token_file="/t", screen=(1280, 720),
                      owner_pid=42, run_as_root=True)
    plain = [a.get("value") for a in ET.fromstring(domain_xml(spec)).iter(QEMU_ARG)]
    assert "-incoming" not in plain and not any("memory-backend" in (a or "") for a in plain)
    clone = [a.get("value") for a in ET.fromstring(domain_xml(replace(
        spec, ram_file="/s/ram.bin", incoming=True))).iter(QEMU_ARG)]
    assert "memory-backend-file,id=wgram,mem-path=/s/ram.bin,size=2048M,share=off" in clone
    assert clone[clone.index("-machine") + 1] == "memory-backend=wgram"
    assert clone[clone.index("-incoming") + 1] == "defer"
    maker = [a.get("value") for a in ET.fromstring(domain_xml(replace(
        spec, ram_file="/s/ram.bin", ram_shared=True))).iter(QEMU_ARG)]
    assert any(a.endswith("share=on") for a in maker) and "-incoming" not in maker


# ------------------------------------------------------------------------------------------- real VMs

@pytest.fixture(scope="module")
def states_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder of the tests' own, with the built base image linked in: its states start empty."""
    from weavegym.core.paths import default_cache_dir
    from weavegym.vm_images.builder import require_image
    from weavegym.vm_images.recipe import ImageRecipe

    cache = tmp_path_factory.mktemp("prepared-cache")
    image = require_image(ImageRecipe("base", "debian-12"), default_cache_dir())
    (cache / "images").mkdir()
    (cache / "images" / image.path.name).symlink_to(image.path)
    return cache


def _config(cache: Path):
    from weavegym.machine.backends.libvirt_vm import LibvirtConfig

    return LibvirtConfig(accel="tcg", prepared_states=True, cache_dir=cache)


@pytest.mark.vm
@pytest.mark.timeout(900)
def test_vms_restored_from_one_state_have_their_own_token_key_and_files(states_cache: Path) -> None:
    from weavegym.machine.agent_identity import new_agent_identity
    from weavegym.machine.backends.libvirt_vm import LibvirtVM
    from weavegym.machine.guest_client import GuestClient

    with LibvirtVM(_config(states_cache)) as first, LibvirtVM(_config(states_cache)) as second:
        assert "cold_boot_s" in first.timings, "the first VM on this cache builds the boot state"
        assert "cold_boot_s" not in second.timings and "restore_s" in second.timings
        assert first.token != second.token and first.identity != second.identity
        assert first.client is not None and second.client is not None
        # Each agent took its own VM's token and key (read live from fw_cfg) and refuses the other's.
        token_file = "/sys/firmware/qemu_fw_cfg/by_name/opt/weavegym/token/raw"
        assert second.client.exec(["cat", token_file]).stdout.strip() == second.token
        assert second.identity is not None and first.identity is not None
        with (GuestClient(second.agent_target, first.token, tls_cert=second.identity.cert_pem) as other_token,
              pytest.raises(AgentAuthError)):
            other_token.health(timeout=10)
        with (GuestClient(second.agent_target, second.token, tls_cert=first.identity.cert_pem) as other_key,
              pytest.raises(AgentUnavailableError)):
            other_key.health(timeout=10)
        with (GuestClient(second.agent_target, second.token, tls_cert=new_agent_identity().cert_pem) as stranger,
              pytest.raises(AgentUnavailableError)):
            stranger.health(timeout=10)
        # Their disks and memory are their own.
        first.client.exec("echo first > /home/user/mine; echo first > /root/mine; sync")
        second.client.exec("echo second > /home/user/mine")
        assert second.client.exec("cat /home/user/mine").stdout == "second\n"
        assert second.client.exec("cat /root/mine").exit_code != 0
        assert first.client.exec("cat /home/user/mine").stdout == "first\n"
        assert first.client.exec("cat /proc/sys/kernel/random/boot_id").stdout == \
            second.client.exec("cat /proc/sys/kernel/random/boot_id").stdout  # one boot, restored twice
        # ...but not one random pool: each restore has a new VM generation ID, and the kernel reseeds on it.
        draw = "head -c 32 /dev/urandom | sha256sum"
        assert first.client.exec(draw).stdout != second.client.exec(draw).stdout
        # A reset restores the state again: the episode's changes are gone, the desktop is back.
        second.reset("ready")
        assert second.client.exec("cat /home/user/mine").exit_code != 0
        assert second.client.list_windows()[1] == "Openbox"
        assert abs(float(second.client.exec("date +%s.%N").stdout) - time.time()) < 5  # the clock was set


@pytest.mark.vm
@pytest.mark.timeout(1200)
def test_an_env_plays_a_variant_that_another_env_set_up(states_cache: Path) -> None:
    from weavegym.envs.tasks import get_task
    from weavegym.envs.weave_env import WeaveEnv
    from weavegym.ops.validation import run_policy

    task_id = "Weave-DevOps-1"
    config = _config(states_cache)
    options = {"cache_dir": config.cache_dir, "accel": "tcg"}
    maker = WeaveEnv(task_id, prepared_states=True, backend_options=options)
    try:
        _, info = maker.reset(options={"task_seed": 3})
        assert info["snapshot"] == "created"
        truth = maker.prepared.truth if maker.prepared else None
    finally:
        maker.close()
    player = WeaveEnv(task_id, prepared_states=True, backend_options=options)
    try:
        _, info = player.reset(options={"task_seed": 3})
        assert info["snapshot"] == "cached", "the second env must load the first one's state, not set it up"
        assert player.prepared is not None and player.prepared.truth == truth
        assert "last_setup_s" not in player.backend.timings
        # The player's VM holds the variant it runs from: a store bounded to nothing cannot remove it, since
        # every reset of the episode below restores it again.
        shape = next(p for p in (states_cache / "states").glob("*/*") if p.is_dir())
        assert [n for n in PreparedStore(shape).names() if n != "ready"] != []
        assert PreparedStore(shape, max_bytes=0).make_room(0) == []
        result = run_policy(player, "oracle", get_task(task_id).oracle, seed=3)
        assert result.action_errors == [] and result.score == 1.0, result.evaluation
    finally:
        player.close()


@pytest.mark.vm
@pytest.mark.timeout(900)
def test_weavegym_prepare_builds_missing_variants_once(states_cache: Path) -> None:
    """The CLI on the tests' cache: variants 0 and 1 are built (and frozen there); a second run finds both and
    builds nothing."""
    env = {**os.environ, "WEAVEGYM_CACHE_DIR": str(states_cache)}
    out = states_cache / "prepare.json"
    command = [sys.executable, "-m", "weavegym.cli", "prepare", "Weave-DevOps-1", "--variants", "2", "--json", str(out)]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=800)
    assert first.returncode == 0, first.stderr[-2000:]
    assert [(r["variant"], r["built"]) for r in json.loads(out.read_text())] == [(0, True), (1, True)]
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [(r["variant"], r["built"]) for r in json.loads(out.read_text())] == [(0, False), (1, False)]
    assert "Weave-DevOps-1" in again.stdout  # the summary table
