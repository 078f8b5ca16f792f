"""Weave-DevOps-7's night capture (no TASK): a seeded packet capture with background traffic and three incidents,
written as classic pcap bytes, and a reader for the pcap and pcapng files Wireshark exports.

Everything is built here in pure Python: Ethernet/IPv4 with TCP or UDP, plausible DNS, HTTP and SSH exchanges of
many hosts, and per alert one incident (a port scan, an SSH brute force, DNS tunnelling, an HTTP POST of a passwd
file) from an attacker address that appears in nothing else, plus a smaller decoy of the same kind outside the
alert's time window. An incident's packets are therefore exactly the packets with ``ip.addr == attacker``.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from calendar import timegm
from collections.abc import Iterable
from typing import Any

import numpy as np

DAY = (2026, 12, 4)
START = timegm((*DAY, 1, 0, 0, 0, 0, 0))  # 01:00:00 UTC
SPAN = 2 * 3600
KINDS = ("scan", "brute", "tunnel", "exfil")
SIGNATURES = {"scan": "TCP PORT SCAN", "brute": "SSH LOGIN BRUTE FORCE", "tunnel": "DNS TUNNEL, LONG QUERY NAMES",
              "exfil": "HTTP POST OF A PASSWD FILE"}
SENSORS = ("DMZ-EDGE-1", "DMZ-EDGE-2", "CORE-SW-3", "WAN-TAP-A", "LAB-GW-4")
RESOLVER = "10.20.0.53"
SERVERS = ("10.20.0.10", "10.20.0.11", "10.20.0.12", "10.20.0.20", "10.20.0.21")
SITES = ("93.184.216.34", "151.101.1.69", "140.82.121.4", "104.16.132.229", "172.217.16.142", "185.199.108.153",
         "13.107.42.14", "199.232.82.109")
NAMES = ("www.example.org", "cdn.jsdelivr.net", "github.com", "pypi.org", "mail.weave.lan", "intranet.weave.lan",
         "deb.debian.org", "fonts.gstatic.com", "wiki.weave.lan", "api.weather.gov")
TUNNEL_DOMAINS = ("cdn-sync.net", "telemetry-io.com", "static-edge.org", "upd-mirror.info")


def _mac(ip: str) -> bytes:
    return b"\x02\x42" + bytes(int(p) for p in ip.split("."))


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ip(src: str, dst: str, proto: int, payload: bytes, ident: int) -> bytes:
    s, d = bytes(int(p) for p in src.split(".")), bytes(int(p) for p in dst.split("."))
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident & 0xFFFF, 0x4000, 64, proto, 0, s, d)
    head = head[:10] + struct.pack("!H", _checksum(head)) + head[12:]
    pseudo = s + d + struct.pack("!BBH", 0, proto, len(payload))
    csum_at = 16 if proto == 6 else 6
    csum = _checksum(pseudo + payload) or (0xFFFF if proto == 17 else 0)
    payload = payload[:csum_at] + struct.pack("!H", csum) + payload[csum_at + 2:]
    return _mac(dst) + _mac(src) + b"\x08\x00" + head + payload


FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


class Capture:
    """Frames as (time, bytes), with the TCP sequence bookkeeping of each conversation."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, bytes]] = []
        self.ident = 1

    def _add(self, t: float, src: str, dst: str, proto: int, payload: bytes) -> None:
        self.ident += 1
        self.frames.append((round(t, 6), _ip(src, dst, proto, payload, self.ident)))

    def tcp(self, t: float, src: str, sport: int, dst: str, dport: int, flags: int, seq: int, ack: int,
            data: bytes = b"") -> None:
        head = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 64240, 0, 0)
        self._add(t, src, dst, 6, head + data)

    def udp(self, t: float, src: str, sport: int, dst: str, dport: int, data: bytes) -> None:
        self._add(t, src, dst, 17, struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data)

    def session(self, rng: np.random.Generator, t: float, client: str, server: str, port: int,
                exchanges: Iterable[tuple[bytes, bytes]], close: bool = True) -> float:
        """A whole TCP conversation: handshake, each (request, reply), FIN both ways; returns its end time."""
        sport = int(rng.integers(32768, 61000))
        cs, ss = int(rng.integers(1, 2**31)), int(rng.integers(1, 2**31))
        rtt = float(rng.uniform(0.002, 0.06))
        self.tcp(t, client, sport, server, port, SYN, cs, 0)
        self.tcp(t + rtt / 2, server, port, client, sport, SYN | ACK, ss, cs + 1)
        t += rtt
        self.tcp(t, client, sport, server, port, ACK, cs + 1, ss + 1)
        cs, ss = cs + 1, ss + 1
        for request, reply in exchanges:
            t += float(rng.uniform(0.01, 0.3))
            if request:
                self.tcp(t, client, sport, server, port, PSH | ACK, cs, ss, request)
                cs += len(request)
            if reply:
                t += rtt / 2
                self.tcp(t, server, port, client, sport, PSH | ACK, ss, cs, reply)
                ss += len(reply)
            t += rtt / 2
            self.tcp(t, client, sport, server, port, ACK, cs, ss)
        if close:
            t += float(rng.uniform(0.01, 0.2))
            self.tcp(t, client, sport, server, port, FIN | ACK, cs, ss)
            self.tcp(t + rtt / 2, server, port, client, sport, FIN | ACK, ss, cs + 1)
            t += rtt
            self.tcp(t, client, sport, server, port, ACK, cs + 1, ss + 1)
        return t


def dns_query(ident: int, name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + struct.pack("!HH", qtype, 1)


def dns_reply(query: bytes, answer: str | None, qtype: int = 1) -> bytes:
    head = struct.pack("!HHHHHH", struct.unpack("!H", query[:2])[0], 0x8180, 1, 1 if answer else 0, 0, 0)
    body = query[12:]
    if answer is None:
        return head[:2] + struct.pack("!H", 0x8183) + head[4:] + body
    if qtype == 16:
        txt = answer.encode()[:255]
        rdata = bytes([len(txt)]) + txt
    else:
        rdata = bytes(int(p) for p in answer.split("."))
    return head + body + struct.pack("!HHHIH", 0xC00C, qtype, 1, 60, len(rdata)) + rdata


def _http_get(rng: np.random.Generator, host: str) -> tuple[bytes, bytes]:
    path = str(rng.choice(["/", "/index.html", "/static/app.js", "/api/v1/status", "/favicon.ico", "/news"]))
    body = b"<html><body>" + b"ok " * int(rng.integers(5, 120)) + b"</body></html>"
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n"
               "Accept: */*\r\n\r\n").encode()
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " + str(len(body)).encode()
             + b"\r\n\r\n" + body)
    return request, reply


def _http_post(host: str, path: str, body: bytes, kind: str = "application/x-www-form-urlencoded"
               ) -> tuple[bytes, bytes]:
    request = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: curl/7.88.1\r\nContent-Type: {kind}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    return request, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Hosts:
    """Addresses handed out once each: workstations, outside hosts, attackers."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = {RESOLVER, *SERVERS, *SITES}

    def take(self, prefix: str) -> str:
        while True:
            if prefix == "outside":
                first = str(self.rng.choice(["198.51.100", "203.0.113", "192.0.2", "45.33.32", "185.220.101"]))
                address = f"{first}.{int(self.rng.integers(2, 254))}"
            else:
                address = f"10.20.{int(self.rng.integers(1, 9))}.{int(self.rng.integers(2, 254))}"
            if address not in self.used:
                self.used.add(address)
                return address


def background(cap: Capture, rng: np.random.Generator, workstations: list[str], admins: list[str],
               sessions: int) -> None:
    for _ in range(sessions):
        t = START + float(rng.uniform(5, SPAN - 60))
        host = str(rng.choice(workstations))
        what = rng.random()
        if what < 0.45:  # a name looked up, then a web page fetched
            name = str(rng.choice(NAMES))
            site = str(rng.choice(SITES))
            query = dns_query(int(rng.integers(1, 65535)), name)
            sport = int(rng.integers(32768, 61000))
            cap.udp(t, host, sport, RESOLVER, 53, query)
            cap.udp(t + float(rng.uniform(0.001, 0.03)), RESOLVER, 53, host, sport, dns_reply(query, site))
            cap.session(rng, t + 0.05, host, site, 80, [_http_get(rng, name) for _ in range(int(rng.integers(1, 4)))])
        elif what < 0.65:  # a plain lookup
            query = dns_query(int(rng.integers(1, 65535)), str(rng.choice(NAMES)), int(rng.choice([1, 28, 15])))
            sport = int(rng.integers(32768, 61000))
            cap.udp(t, host, sport, RESOLVER, 53, query)
            cap.udp(t + float(rng.uniform(0.001, 0.03)), RESOLVER, 53, host, sport,
                    dns_reply(query, None) if rng.random() < 0.2 else dns_reply(query, str(rng.choice(SITES))))
        elif what < 0.8:  # an admin's SSH session
            admin = str(rng.choice(admins))
            exchanges = [(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")]
            exchanges += [(bytes(rng.integers(0, 256, int(rng.integers(40, 300)), dtype=np.uint8)),
                           bytes(rng.integers(0, 256, int(rng.integers(40, 600)), dtype=np.uint8)))
                          for _ in range(int(rng.integers(3, 9)))]
            cap.session(rng, t, admin, str(rng.choice(SERVERS)), 22, exchanges)
        elif what < 0.9:  # a form posted to an intranet server
            body = f"user=u{int(rng.integers(100, 999))}&comment=ticket+{int(rng.integers(1000, 9999))}".encode()
            cap.session(rng, t, host, str(rng.choice(SERVERS[:3])), 80,
                        [_http_post("intranet.weave.lan", "/form", body)])
        else:  # a TLS-ish connection: handshake and a little data
            cap.session(rng, t, host, str(rng.choice(SITES)), 443,
                        [(b"\x16\x03\x01\x00\x05hello", b"\x16\x03\x03\x00\x05hello")])


# ---- incidents: each returns the address it used as the attacker ----------------------------------------------

def scan(cap: Capture, rng: np.random.Generator, t: float, attacker: str, victim: str, size: float) -> float:
    ports = rng.choice(np.arange(1, 1025), int(30 + 50 * size), replace=False)
    open_ports = {22, 80, 443}
    for port in [*sorted(int(p) for p in ports), 22, 80]:
        t += float(rng.uniform(0.05, 0.6))
        sport, seq = int(rng.integers(40000, 60000)), int(rng.integers(1, 2**31))
        cap.tcp(t, attacker, sport, victim, port, SYN, seq, 0)
        if port in open_ports:
            cap.tcp(t + 0.001, victim, port, attacker, sport, SYN | ACK, int(rng.integers(1, 2**31)), seq + 1)
            cap.tcp(t + 0.002, attacker, sport, victim, port, RST, seq + 1, 0)
        else:
            cap.tcp(t + 0.001, victim, port, attacker, sport, RST | ACK, 0, seq + 1)
    return t


def brute(cap: Capture, rng: np.random.Generator, t: float, attacker: str, victim: str, size: float) -> float:
    for _ in range(int(12 + 18 * size)):
        t += float(rng.uniform(0.4, 3.0))
        exchanges = [(b"SSH-2.0-libssh_0.9.6\r\n", b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"),
                     (bytes(rng.integers(0, 256, 96, dtype=np.uint8)), b"\x00\x00\x00\x0c\x0a\x33denied!!")]
        t = cap.session(rng, t, attacker, victim, 22, exchanges)
    return t


def tunnel(cap: Capture, rng: np.random.Generator, t: float, attacker: str, victim: str, size: float) -> float:
    domain = str(rng.choice(TUNNEL_DOMAINS))
    secret = bytes(rng.integers(0, 256, int(400 + 600 * size), dtype=np.uint8))
    chunks = [secret[i:i + 30] for i in range(0, len(secret), 30)]
    for n, chunk in enumerate(chunks):
        t += float(rng.uniform(0.2, 1.5))
        label = base64.b32encode(chunk).decode().rstrip("=").lower()
        query = dns_query(int(rng.integers(1, 65535)), f"{label}.s{n}.{domain}", 16)
        sport = int(rng.integers(32768, 61000))
        cap.udp(t, attacker, sport, RESOLVER, 53, query)
        cap.udp(t + float(rng.uniform(0.01, 0.08)), RESOLVER, 53, attacker, sport, dns_reply(query, "ack", 16))
    return t


PASSWD = "".join(f"{n}:x:{u}:{u}:{n}:/{'root' if u == 0 else 'home/' + n}:/bin/bash\n" for n, u in
                 (("root", 0), ("daemon", 1), ("alice", 1000), ("bob", 1001), ("carol", 1002), ("svc_backup", 1003)))


def exfil(cap: Capture, rng: np.random.Generator, t: float, attacker: str, victim: str, size: float) -> float:
    posts = int(1 + 3.5 * size)
    for n in range(posts):
        t += float(rng.uniform(1, 8))
        body = (PASSWD if n == 0 else PASSWD[:80 + 40 * n]).encode()
        body = f"--b\r\nContent-Disposition: form-data; name=f; filename=p{n}\r\n\r\n".encode() + body + b"\r\n--b--"
        t = cap.session(rng, t, attacker, victim, 80, [_http_post("drop.example.net", "/upload", body,
                                                                   "multipart/form-data; boundary=b")])
    return t


INCIDENTS = {"scan": scan, "brute": brute, "tunnel": tunnel, "exfil": exfil}


def _roles(kind: str, hosts: Hosts) -> tuple[str, str]:
    """(attacker, victim) for an incident of ``kind``: outsiders attack servers; insiders leak outward."""
    if kind in ("scan", "brute"):
        return hosts.take("outside"), str(hosts.rng.choice(SERVERS))
    if kind == "tunnel":
        return hosts.take("inside"), RESOLVER
    return hosts.take("inside"), hosts.take("outside")


def clock(epoch: float) -> str:
    seconds = int(epoch) % 86400
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def frame_key(t: float, data: bytes) -> str:
    """A packet's identity for the checker: its microsecond timestamp and the SHA-256 of its bytes."""
    return f"{round(t * 1e6)}:{hashlib.sha256(data).hexdigest()[:24]}"


def night(rng: np.random.Generator) -> dict[str, Any]:
    """The capture's frames (sorted by time) and its three alerts (each with the incident's packet keys)."""
    kinds = [str(k) for k in rng.choice(KINDS, 3, replace=False)]
    hosts = Hosts(rng)
    workstations = [hosts.take("inside") for _ in range(int(rng.integers(14, 24)))]
    admins = [hosts.take("inside") for _ in range(3)]
    cap = Capture()
    background(cap, rng, workstations, admins, int(rng.integers(220, 360)))
    # Three slots spread over the night for the alerts, decoys well away from each alert's window.
    slots = sorted(float(s) for s in rng.choice(np.arange(600, SPAN - 900, 300), 6, replace=False))
    order = rng.permutation(6)
    alerts = []
    for index, kind in enumerate(kinds):
        start = START + slots[int(order[index])] + float(rng.uniform(0, 60))
        decoy_at = START + slots[int(order[index + 3])] + float(rng.uniform(0, 60))
        attacker, victim = _roles(kind, hosts)
        before = len(cap.frames)
        end = INCIDENTS[kind](cap, rng, start, attacker, victim, float(rng.uniform(0.4, 1.0)))
        packets = sorted(cap.frames[before:])
        decoy, decoy_victim = _roles(kind, hosts)
        INCIDENTS[kind](cap, rng, decoy_at, decoy, decoy_victim, float(rng.uniform(0.0, 0.3)))
        lo = int(packets[0][0]) - int(rng.integers(5, 40))
        hi = int(end) + int(rng.integers(5, 40))
        alerts.append({"kind": kind, "signature": SIGNATURES[kind], "sensor": str(rng.choice(SENSORS)),
                       "from": clock(lo), "to": clock(hi), "window": [lo, hi], "attacker": attacker,
                       "victim": victim, "decoy": decoy, "packets": len(packets),
                       "keys": sorted(frame_key(t, d) for t, d in packets)})
    cap.frames.sort(key=lambda f: f[0])
    return {"frames": cap.frames, "alerts": alerts}


def pcap_bytes(frames: Iterable[tuple[float, bytes]]) -> bytes:
    """Classic little-endian pcap, microsecond timestamps, Ethernet."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for t, data in frames:
        usec = round(t * 1e6)
        out.append(struct.pack("<IIII", usec // 1_000_000, usec % 1_000_000, len(data), len(data)) + data)
    return b"".join(out)


# ---- reading what Wireshark exported ----------------------------------------------------------------------

def read_packets(data: bytes) -> list[tuple[float, bytes]]:
    """(time, bytes) of every packet of a pcap or pcapng file; ValueError for anything else or a damaged file."""
    if len(data) < 24:
        raise ValueError("too short for a capture file")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"):
        return _read_pcap(data)
    if magic == b"\x0a\x0d\x0d\x0a":
        return _read_pcapng(data)
    raise ValueError("neither a pcap nor a pcapng file")


def _read_pcap(data: bytes) -> list[tuple[float, bytes]]:
    end = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    nano = data[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    packets, at = [], 24
    while at < len(data):
        if at + 16 > len(data):
            raise ValueError("a truncated packet header")
        sec, frac, incl, _orig = struct.unpack(end + "IIII", data[at:at + 16])
        if at + 16 + incl > len(data):
            raise ValueError("a truncated packet")
        packets.append((sec + frac / (1e9 if nano else 1e6), data[at + 16:at + 16 + incl]))
        at += 16 + incl
    return packets


def _tsresol(options: bytes, end: str) -> float:
    at = 0
    while at + 4 <= len(options):
        code, length = struct.unpack(end + "HH", options[at:at + 4])
        if code == 0:
            break
        if code == 9 and length >= 1:
            value = options[at + 4]
            return 2.0 ** -(value & 0x7F) if value & 0x80 else 10.0 ** -value
        at += 4 + (length + 3) // 4 * 4
    return 1e-6


def _read_pcapng(data: bytes) -> list[tuple[float, bytes]]:
    packets: list[tuple[float, bytes]] = []
    interfaces: list[float] = []
    end, at = "<", 0
    while at < len(data):
        if at + 12 > len(data):
            raise ValueError("a truncated block")
        if data[at:at + 4] == b"\x0a\x0d\x0d\x0a":
            end = "<" if data[at + 8:at + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            if struct.unpack(end + "I", data[at + 8:at + 12])[0] != 0x1A2B3C4D:
                raise ValueError("a section header of unknown byte order")
            interfaces = []
        kind, length = struct.unpack(end + "II", data[at:at + 8])
        if length < 12 or length % 4 or at + length > len(data):
            raise ValueError(f"a block of bad length {length}")
        body = data[at + 8:at + length - 4]
        if kind == 1:  # interface description
            interfaces.append(_tsresol(body[8:], end))
        elif kind == 6:  # enhanced packet
            iface, high, low, captured, _orig = struct.unpack(end + "IIIII", body[:20])
            if iface >= len(interfaces):
                raise ValueError("a packet on an undescribed interface")
            packets.append((((high << 32) | low) * interfaces[iface], body[20:20 + captured]))
        elif kind == 3:  # simple packet: no timestamp
            packets.append((0.0, body[4:4 + struct.unpack(end + "I", body[:4])[0]]))
        at += length
    return packets
