"""Decide whether QEMU can use KVM here by running a 512-byte guest, not by looking at /dev/kvm.

On the build/CI machines (nested virtualisation) ``/dev/kvm`` exists, ``KVM_CREATE_VM`` succeeds
and even SeaBIOS plus a boot sector run, but guest code then executes about 1000x slower than
under TCG: a Linux kernel sits in its decompressor after "Probing EDD" and looks hung. So the probe
boots into long mode and spins through a fixed amount of work under a deadline. The verdict is
cached per machine (QEMU version, kernel release, /dev/kvm presence) so the cost is paid once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from weavegym.core.paths import default_cache_dir

MARKER = b"WEAVEGYM-PROBE-OK"
EXIT_PORT = 0xF4
EXIT_VALUE = 0x2A  # isa-debug-exit makes QEMU exit with (value << 1) | 1
EXPECTED_STATUS = (EXIT_VALUE << 1) | 1  # 85: no normal QEMU exit uses this status
CACHE_FILE = "accel.json"
_KILL_GRACE_S = 5.0
# 64 chunks of 2^20 two-instruction spins: ~0.4 s under TCG, ~0.03 s under working KVM, ~70 s under
# the KVM of the CI machines (about 1 us per spin there).
WORK_CHUNKS = 64
SPINS_PER_CHUNK = 1 << 20
STAGES = {"R": "16-bit real mode", "P": "32-bit protected mode", "L": "64-bit long mode"}


@dataclass
class ProbeResult:
    """One probe's verdict. ``fallback_from`` holds the failed KVM probe when TCG was chosen."""

    accel: str
    works: bool
    seconds: float
    reason: str
    fallback_from: ProbeResult | None = None
    from_cache: bool = False

    def to_dict(self) -> dict[str, object]:
        """JSON form for the cache; ``from_cache`` describes this process only, so it is left out."""
        data = asdict(self)
        data.pop("from_cache")
        data["fallback_from"] = self.fallback_from.to_dict() if self.fallback_from else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ProbeResult:
        inner = data.get("fallback_from")
        return cls(
            accel=str(data["accel"]),
            works=bool(data["works"]),
            seconds=float(data["seconds"]),  # type: ignore[arg-type]
            reason=str(data["reason"]),
            fallback_from=cls.from_dict(inner) if isinstance(inner, dict) else None,
        )


class _Asm:
    """Just enough of an assembler to place hand-encoded bytes and patch label references."""

    def __init__(self, origin: int) -> None:
        self.origin = origin
        self.code = bytearray()
        self.labels: dict[str, int] = {}
        self.fixups: list[tuple[int, int, str, bool]] = []  # (offset, size, label, pc-relative)

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def emit(self, data: bytes) -> None:
        self.code += data

    def ref(self, label: str, size: int, *, relative: bool = False) -> None:
        """Reserve ``size`` bytes for the absolute address of ``label`` (or a rel8 jump to it)."""
        self.fixups.append((len(self.code), size, label, relative))
        self.code += bytes(size)

    def assemble(self) -> bytes:
        for offset, size, label, relative in self.fixups:
            if relative:  # rel8 counts from the end of the jump instruction
                value = (self.labels[label] - (offset + size)).to_bytes(size, "little", signed=True)
            else:
                value = (self.origin + self.labels[label]).to_bytes(size, "little")
            self.code[offset : offset + size] = value
        return bytes(self.code)


def boot_sector() -> bytes:
    """A BIOS boot sector that goes real -> protected -> long mode, spins, prints MARKER, debug-exits.

    Booting alone is not enough: on the CI machines KVM boots this far fine but then runs guest
    code about 1000x slower than TCG (a Linux kernel stalls in its decompressor), so the probe must
    also *compute*. Serial output is "R", "P", "L" per mode reached, one "." per finished work
    chunk, then MARKER; a timed-out probe can therefore say how far the guest got.
    """
    a = _Asm(origin=0x7C00)
    # --- 16-bit real mode, loaded at 0000:7C00 ---
    a.emit(b"\xfa")                           # cli                 ; no interrupts, no IDT needed
    a.emit(b"\x31\xc0")                       # xor ax, ax
    a.emit(b"\x8e\xd8")                       # mov ds, ax          ; DS=0, so labels are absolute
    a.emit(b"\x8e\xc0")                       # mov es, ax
    a.emit(b"\x8e\xd0")                       # mov ss, ax
    a.emit(b"\xbc\x00\x7c")                   # mov sp, 0x7C00
    a.emit(b"\xfc")                           # cld                 ; string ops walk forward
    a.emit(b"\xba\xf8\x03")                   # mov dx, 0x3F8       ; COM1 data register (kept in dx)
    a.emit(b"\xb0" + b"R")                    # mov al, 'R'
    a.emit(b"\xee")                           # out dx, al          ; stage R: real mode runs
    a.emit(b"\xe4\x92")                       # in al, 0x92
    a.emit(b"\x0c\x02")                       # or al, 2
    a.emit(b"\xe6\x92")                       # out 0x92, al        ; fast A20 gate on
    a.emit(b"\x0f\x01\x16")                   # lgdt [gdtr]
    a.ref("gdtr", 2)
    a.emit(b"\x0f\x20\xc0")                   # mov eax, cr0
    a.emit(b"\x0c\x01")                       # or al, 1            ; CR0.PE
    a.emit(b"\x0f\x22\xc0")                   # mov cr0, eax
    a.emit(b"\xea")                           # jmp 0x08:pm32       ; far jump loads the 32-bit CS
    a.ref("pm32", 2)
    a.emit(b"\x08\x00")
    # --- 32-bit protected mode ---
    a.label("pm32")
    a.emit(b"\x66\xb8\x10\x00")               # mov ax, 0x10        ; flat data selector
    a.emit(b"\x8e\xd8")                       # mov ds, ax
    a.emit(b"\x8e\xc0")                       # mov es, ax
    a.emit(b"\x8e\xd0")                       # mov ss, ax
    a.emit(b"\xb0" + b"P")                    # mov al, 'P'
    a.emit(b"\xee")                           # out dx, al          ; stage P: protected mode runs
    a.emit(b"\xbf\x00\x10\x00\x00")           # mov edi, 0x1000
    a.emit(b"\x31\xc0")                       # xor eax, eax
    a.emit(b"\xb9\x00\x0c\x00\x00")           # mov ecx, 0xC00
    a.emit(b"\xf3\xab")                       # rep stosd           ; zero 3 pages at 0x1000-0x3FFF
    a.emit(b"\xc7\x05\x00\x10\x00\x00\x03\x20\x00\x00")  # mov dword [0x1000], 0x2003 ; PML4[0] -> PDPT
    a.emit(b"\xc7\x05\x00\x20\x00\x00\x03\x30\x00\x00")  # mov dword [0x2000], 0x3003 ; PDPT[0] -> PD
    a.emit(b"\xc7\x05\x00\x30\x00\x00\x83\x00\x00\x00")  # mov dword [0x3000], 0x83   ; PD[0]: 2 MiB at 0
    a.emit(b"\xb8\x00\x10\x00\x00")           # mov eax, 0x1000
    a.emit(b"\x0f\x22\xd8")                   # mov cr3, eax        ; page tables
    a.emit(b"\x0f\x20\xe0")                   # mov eax, cr4
    a.emit(b"\x83\xc8\x20")                   # or eax, 0x20        ; CR4.PAE
    a.emit(b"\x0f\x22\xe0")                   # mov cr4, eax
    a.emit(b"\xb9\x80\x00\x00\xc0")           # mov ecx, 0xC0000080 ; IA32_EFER
    a.emit(b"\x0f\x32")                       # rdmsr               ; (clobbers edx)
    a.emit(b"\x0d\x00\x01\x00\x00")           # or eax, 0x100       ; EFER.LME
    a.emit(b"\x0f\x30")                       # wrmsr
    a.emit(b"\x0f\x20\xc0")                   # mov eax, cr0
    a.emit(b"\x0d\x00\x00\x00\x80")           # or eax, 0x80000000  ; CR0.PG: long mode active
    a.emit(b"\x0f\x22\xc0")                   # mov cr0, eax
    a.emit(b"\xea")                           # jmp 0x18:lm64       ; far jump loads the 64-bit CS
    a.ref("lm64", 4)
    a.emit(b"\x18\x00")
    # --- 64-bit long mode ---
    a.label("lm64")
    a.emit(b"\x66\xba\xf8\x03")               # mov dx, 0x3F8       ; rdmsr clobbered it
    a.emit(b"\xb0" + b"L")                    # mov al, 'L'
    a.emit(b"\xee")                           # out dx, al          ; stage L: long mode runs
    a.emit(b"\xb3" + bytes([WORK_CHUNKS]))    # mov bl, WORK_CHUNKS
    a.label("chunk")
    a.emit(b"\xb9" + SPINS_PER_CHUNK.to_bytes(4, "little"))  # mov ecx, SPINS_PER_CHUNK
    a.label("spin")
    a.emit(b"\xff\xc9")                       # spin: dec ecx       ; pure CPU work, no exits
    a.emit(b"\x75")                           # jnz spin
    a.ref("spin", 1, relative=True)
    a.emit(b"\xb0" + b".")                    # mov al, '.'
    a.emit(b"\xee")                           # out dx, al          ; one dot per finished chunk
    a.emit(b"\xfe\xcb")                       # dec bl
    a.emit(b"\x75")                           # jnz chunk
    a.ref("chunk", 1, relative=True)
    a.emit(b"\xbe")                           # mov esi, msg        ; zero-extends into rsi
    a.ref("msg", 4)
    a.label("next")
    a.emit(b"\xac")                           # next: lodsb         ; al = [rsi++]
    a.emit(b"\x84\xc0")                       # test al, al
    a.emit(b"\x74")                           # jz done             ; NUL ends the string
    a.ref("done", 1, relative=True)
    a.emit(b"\xee")                           # out dx, al          ; QEMU's UART never drops a byte
    a.emit(b"\xeb")                           # jmp next
    a.ref("next", 1, relative=True)
    a.label("done")
    a.emit(b"\x66\xba" + EXIT_PORT.to_bytes(2, "little"))  # mov dx, 0xF4  ; isa-debug-exit
    a.emit(b"\xb0" + bytes([EXIT_VALUE]))     # mov al, EXIT_VALUE
    a.emit(b"\xee")                           # out dx, al          ; QEMU exits with (al << 1) | 1
    a.label("halt")
    a.emit(b"\xf4")                           # halt: hlt           ; only reached without the device
    a.emit(b"\xeb")                           # jmp halt
    a.ref("halt", 1, relative=True)
    # --- data ---
    a.emit(bytes(-len(a.code) % 8))            # align 8
    a.label("gdt")
    a.emit(bytes(8))                           # null descriptor
    a.emit(bytes.fromhex("ffff0000009acf00"))  # 0x08: 32-bit code, base 0, limit 4 GiB
    a.emit(bytes.fromhex("ffff00000092cf00"))  # 0x10: data, base 0, limit 4 GiB
    a.emit(bytes.fromhex("ffff0000009aaf00"))  # 0x18: 64-bit code (L=1)
    a.label("gdtr")
    a.emit((4 * 8 - 1).to_bytes(2, "little"))  # GDT limit
    a.ref("gdt", 4)                            # GDT base
    a.label("msg")
    a.emit(MARKER + b"\r\n\x00")              # msg: db "WEAVEGYM-PROBE-OK", 13, 10, 0
    code = a.assemble()
    if len(code) > 510:
        raise AssertionError("boot sector code overflows 510 bytes")
    return code + bytes(510 - len(code)) + b"\x55\xaa"  # BIOS boot signature


def find_qemu(qemu: str | None = None) -> str | None:
    """Resolve the QEMU binary: an explicit path/name, else qemu-system-x86_64 on PATH."""
    return shutil.which(qemu or "qemu-system-x86_64")


def _kvm_device_problem() -> str:
    """Why /dev/kvm cannot be used by this user, or '' if it can be opened."""
    if not os.path.exists("/dev/kvm"):
        return "/dev/kvm missing (no kvm module loaded, or virtualisation disabled/not passed through)"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return f"/dev/kvm not accessible to uid {os.getuid()} (not in the kvm group?)"
    return ""


def _tail(data: bytes, lines: int = 4) -> str:
    text = data.decode("utf-8", "replace").strip().splitlines()
    return " | ".join(text[-lines:]) if text else "(no stderr)"


def probe_accelerator(accel: str = "kvm", timeout_s: float = 10.0, qemu: str | None = None) -> ProbeResult:
    """Boot the probe sector under ``accel``; works only if QEMU exits by itself with the marker out."""
    start = time.monotonic()

    def verdict(works: bool, reason: str) -> ProbeResult:
        return ProbeResult(accel, works, round(time.monotonic() - start, 3), reason)

    binary = find_qemu(qemu)
    if binary is None:
        return verdict(False, f"qemu not found: {qemu or 'qemu-system-x86_64'} is not on PATH or not executable")
    if accel == "kvm" and (problem := _kvm_device_problem()):
        return verdict(False, problem)
    with tempfile.TemporaryDirectory(prefix="weavegym-probe-") as tmp:
        image, serial = Path(tmp) / "boot.bin", Path(tmp) / "serial.log"
        image.write_bytes(boot_sector())
        argv = [
            binary, "-accel", accel, "-display", "none", "-nodefaults", "-no-reboot", "-m", "16",
            "-serial", f"file:{serial}",
            "-device", f"isa-debug-exit,iobase={EXIT_PORT:#x},iosize=0x04",
            "-drive", f"format=raw,file={image},if=ide",
        ]
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True,  # own process group, so a hang is killed with all children
            )
        except OSError as exc:
            return verdict(False, f"could not start {binary}: {exc}")
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            killed = _kill_group(proc)
            output = serial.read_bytes() if serial.exists() else b""
            return verdict(False, _hang_reason(output, timeout_s, accel) + killed)
        output = serial.read_bytes() if serial.exists() else b""
    status = proc.returncode
    if status == EXPECTED_STATUS and MARKER in output:
        return verdict(True, f"booted to long mode, ran {WORK_CHUNKS} work chunks and exited under {accel}")
    if status == EXPECTED_STATUS:
        return verdict(False, f"wrong output: exit status ok but serial had {output[-80:]!r}, not {MARKER!r}")
    if status in (0, 1) and not output:
        return verdict(False, f"qemu refused -accel {accel} (exit {status}): {_tail(stderr)}")
    return verdict(
        False, f"wrong output: exit {status}, expected {EXPECTED_STATUS}; {_progress(output)}; "
        f"stderr: {_tail(stderr)}",
    )


def _progress(output: bytes) -> str:
    """Turn the probe's serial trail ("RPL....") into words."""
    reached = [STAGES[c] for c in output[:3].decode("ascii", "replace") if c in STAGES]
    if not reached:
        return "guest printed nothing"
    return f"guest reached {reached[-1]} and finished {output.count(b'.')}/{WORK_CHUNKS} work chunks"


def _hang_reason(output: bytes, timeout_s: float, accel: str) -> str:
    why = " (KVM guests hang on this machine class)" if accel == "kvm" else ""
    if not output:
        return f"hung: no output within {timeout_s:g}s{why}"
    return f"hung: no exit within {timeout_s:g}s; {_progress(output)}, so its vCPU is far too slow{why}"


def _kill_group(proc: subprocess.Popen[bytes]) -> str:
    """SIGKILL the probe's whole process group and reap it, bounded so a stuck vCPU cannot hang us."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        return f"; qemu pid {proc.pid} did not die within {_KILL_GRACE_S:.0f}s of SIGKILL"
    return ""


def qemu_version(qemu: str | None = None) -> str:
    """First line of ``qemu --version``, or a placeholder when QEMU is absent or broken."""
    binary = find_qemu(qemu)
    if binary is None:
        return "missing"
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, timeout=5, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"broken: {exc}"
    return out.decode("utf-8", "replace").strip().splitlines()[0] if out.strip() else "unknown"


def machine_key(qemu: str | None = None) -> dict[str, object]:
    """What invalidates a cached verdict: a new QEMU, a new kernel, or /dev/kvm appearing/vanishing."""
    return {"qemu": qemu_version(qemu), "kernel": platform.release(), "dev_kvm": os.path.exists("/dev/kvm")}


def choose_accelerator(
    cache_dir: Path | None = None,
    *,
    refresh: bool = False,
    kvm_timeout_s: float = 10.0,
    tcg_timeout_s: float = 30.0,
    qemu: str | None = None,
) -> ProbeResult:
    """KVM if a guest really runs under it, else TCG (probed too, so a broken QEMU is reported).

    The verdict is cached in ``cache_dir/accel.json``; ``refresh`` re-probes. A verdict where
    nothing works is not cached, so fixing the host is noticed on the next call.
    """
    path = (cache_dir or default_cache_dir()) / CACHE_FILE
    key = machine_key(qemu)
    if not refresh and (cached := _read_cache(path, key)) is not None:
        return cached
    with _probe_lock(path):  # parallel envs starting together probe once; the rest read the cache
        if not refresh and (cached := _read_cache(path, key)) is not None:
            return cached
        result = probe_accelerator("kvm", kvm_timeout_s, qemu)
        if not result.works:
            kvm = result
            result = probe_accelerator("tcg", tcg_timeout_s, qemu)
            result.fallback_from = kvm
        if result.works:
            _write_cache(path, key, result)
    return result


@contextlib.contextmanager
def _probe_lock(path: Path) -> Iterator[None]:
    """An flock beside the cache file; without a writable cache dir, probe unlocked."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held across the yield
    except OSError:
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _read_cache(path: Path, key: dict[str, object]) -> ProbeResult | None:
    try:
        data = json.loads(path.read_text())
        if data.get("key") != key:
            return None
        result = ProbeResult.from_dict(data["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or corrupt cache: just probe again
    result.from_cache = True
    return result


def _write_cache(path: Path, key: dict[str, object], result: ProbeResult) -> None:
    """Write atomically so parallel processes never read a half-written file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".accel-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump({"key": key, "result": result.to_dict()}, fh, indent=2)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs a re-probe next time
