"""The libvirt domain definition of a weavegym VM, as a pure function of its spec.

Choices, each from a fact measured on our machines:
- direct kernel boot, no bootloader;
- std VGA (the generic Debian kernel's bochs DRM driver gives Xorg a screen);
- a USB tablet, so host-side absolute pointer input works;
- QEMU user-mode networking through ``<qemu:commandline>`` with ``restrict=on``
  (guest offline) and one host-forward for the agent, bound to 127.0.0.1,
  because this libvirt rejects ``<backend type='passt'/>`` and there is no bridge;
- the agent token in a QEMU fw_cfg entry read from a 0600 file (never on QEMU's command line, where
  every host user's `ps` would show it), readable by root only in the guest; the agent's TLS key and
  certificate the same way, so it proves its identity before the host sends the token; the screen
  size in SMBIOS;
- VNC on a fixed port and 127.0.0.1 only, with a password;
- QEMU as root (DAC label 0:0) under qemu:///system, so it can read images in root's cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
WEAVEGYM_NS = "https://weavegym.dev/xmlns/vm/1"
FW_CFG_TOKEN = "opt/weavegym/token"  # the guest agent reads /sys/firmware/qemu_fw_cfg/by_name/<this>/raw
FW_CFG_IDENTITY = "opt/weavegym/identity"  # the agent's TLS key and certificate, read the same way


@dataclass(frozen=True)
class DomainSpec:
    name: str
    domain_type: str  # "kvm" or "qemu" (TCG)
    memory_mib: int
    vcpus: int
    kernel: str
    initrd: str
    disk: str
    console_log: str
    vnc_port: int
    vnc_password: str
    agent_host_port: int
    agent_guest_port: int
    token_file: str  # on the QEMU host, 0600: the agent token, passed to the guest as a fw_cfg file
    screen: tuple[int, int]
    owner_pid: int
    run_as_root: bool
    vsock: bool = False  # agent over virtio-vsock instead of a user-mode NIC (needs /dev/vhost-vsock)
    ssh_host_port: int = 0  # >0: forward 127.0.0.1:ssh_host_port to the guest's sshd (the ssh backend's tests)
    emulator: str = "/usr/bin/qemu-system-x86_64"
    identity_file: str = ""  # on the QEMU host, 0600: the agent's TLS key and certificate ("" : plain gRPC)
    # Guest RAM in this file (prepared_states.py): written through (ram_shared) by a VM that prepares a
    # state, mapped copy-on-write by every VM restored from it. "" : anonymous RAM, as usual.
    ram_file: str = ""
    ram_shared: bool = False
    incoming: bool = False  # start waiting for a migration stream (a restore), not booting


# no_timer_check: under TCG on an overloaded host the kernel's early IO-APIC timer test can miss its
# interrupts and panic ("IO-APIC + timer doesn't work!"); seen here with 6 TCG guests on 2 cores.
KERNEL_CMDLINE = ("root=/dev/vda rw console=ttyS0 quiet loglevel=3 net.ifnames=0 systemd.show_status=0 "
                  "no_timer_check")


def domain_xml(spec: DomainSpec) -> str:
    q = quoteattr
    width, height = spec.screen
    seclabel = ("<seclabel type='static' model='dac' relabel='no'><label>+0:+0</label></seclabel>"
                if spec.run_as_root else "")
    args: list[str] = []
    if not spec.vsock:  # with vsock the guest gets no NIC at all; the host relays 127.0.0.1:agent_host_port to it
        netdev = (f"user,id=wgnet,restrict=on,"
                  f"hostfwd=tcp:127.0.0.1:{spec.agent_host_port}-:{spec.agent_guest_port}")
        if spec.ssh_host_port:
            netdev += f",hostfwd=tcp:127.0.0.1:{spec.ssh_host_port}-:22"
        args += ["-netdev", netdev, "-device", "virtio-net-pci,netdev=wgnet,bus=pci.0,addr=0x9"]
    if spec.ram_file:
        share = "on" if spec.ram_shared else "off"
        args += ["-object", f"memory-backend-file,id=wgram,mem-path={spec.ram_file},"
                            f"size={spec.memory_mib}M,share={share}",
                 "-machine", "memory-backend=wgram"]
    if spec.incoming:
        args += ["-incoming", "defer"]
    commandline = ("<qemu:commandline>" + "".join(f"\n    <qemu:arg value={q(a)}/>" for a in args)
               + "\n  </qemu:commandline>") if args else ""
    vsock = "<vsock model='virtio'><cid auto='yes'/></vsock>" if spec.vsock else ""
    # A VM generation ID that libvirt makes new at every start: VMs restored from one prepared state share
    # the kernel's random pool, and Linux reseeds it when this ID changes (else they could draw the same bytes
    # until its next reseed).
    genid = "<genid/>\n  " if spec.ram_file else ""
    identity = (f"\n    <entry name={q(FW_CFG_IDENTITY)} file={q(spec.identity_file)}/>"
                if spec.identity_file else "")
    return f"""<domain type={q(spec.domain_type)} xmlns:qemu={q(QEMU_NS)}>
  <name>{spec.name}</name>
  <metadata>
    <weavegym:vm xmlns:weavegym={q(WEAVEGYM_NS)}>
      <weavegym:owner pid={q(str(spec.owner_pid))}/>
      <weavegym:overlay path={q(spec.disk)}/>
    </weavegym:vm>
  </metadata>
  {genid}<memory unit='MiB'>{spec.memory_mib}</memory>
  <vcpu>{spec.vcpus}</vcpu>
  <sysinfo type='smbios'>
    <oemStrings>
      <entry>weavegym-screen={width}x{height}</entry>
    </oemStrings>
  </sysinfo>
  <sysinfo type='fwcfg'>
    <entry name={q(FW_CFG_TOKEN)} file={q(spec.token_file)}/>{identity}
  </sysinfo>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{spec.kernel}</kernel>
    <initrd>{spec.initrd}</initrd>
    <cmdline>{KERNEL_CMDLINE}</cmdline>
    <smbios mode='sysinfo'/>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{spec.emulator}</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='unsafe' discard='unmap'/>
      <source file={q(spec.disk)}/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='file'><source path={q(spec.console_log)}/><target port='0'/></serial>
    <input type='tablet' bus='usb'/>
    <input type='keyboard' bus='ps2'/>
    <graphics type='vnc' port='{spec.vnc_port}' autoport='no' passwd={q(spec.vnc_password)}>
      <listen type='address' address='127.0.0.1'/>
    </graphics>
    <video><model type='vga' vram='16384' heads='1' primary='yes'/></video>
    <memballoon model='none'/>
    {vsock}
  </devices>
  {seclabel}
  {commandline}
</domain>
"""
