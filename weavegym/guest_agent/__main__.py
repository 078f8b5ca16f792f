"""Command line of the guest agent.

    python -m weavegym.guest_agent --display :0 --listen 127.0.0.1:7600 --token-file /run/weavegym/token

Once it listens it prints one JSON line, ``{"event": "listening", "port": N, …}``,
on stdout, so a launcher can wait for that line instead of sleeping.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from weavegym.guest_agent import AGENT_VERSION
from weavegym.guest_agent.auth import (
    FW_CFG_IDENTITY,
    FW_CFG_TOKEN,
    TlsIdentity,
    read_fwcfg_identity,
    read_fwcfg_token,
    read_identity_file,
    read_token_file,
)
from weavegym.guest_agent.cgroups import EPISODE_UNIT_CGROUP, episode_cgroup
from weavegym.guest_agent.display import LOCK_TIMEOUT_S
from weavegym.guest_agent.relay import Relay, tcp_connector, vsock_listener
from weavegym.guest_agent.server import AgentConfig, build_server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m weavegym.guest_agent", description=__doc__.split("\n")[0])
    p.add_argument("--display", required=True, help="X display to serve, e.g. :0")
    p.add_argument("--listen", default="127.0.0.1:7600", help="host:port to bind (port 0 picks a free one)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--token-file", help="file holding the per-VM token")
    src.add_argument("--token-fwcfg", action="store_true",
                     help="read the token from the QEMU fw_cfg entry opt/weavegym/token (waits for it)")
    tls = p.add_mutually_exclusive_group()
    tls.add_argument("--tls-file", metavar="F", help="serve TLS with the PEM key and certificate in F")
    tls.add_argument("--tls-fwcfg", action="store_true",
                     help="serve TLS with the key and certificate of the QEMU fw_cfg entry opt/weavegym/identity")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter for RunPython")
    p.add_argument("--vsock-port", type=int, default=0,
                   help="also accept connections on this AF_VSOCK port (relayed to the TCP listener)")
    p.add_argument("--no-display-for", default="", metavar="USER[,USER]",
                   help="accounts whose commands get no DISPLAY (the episode's workspace account)")
    p.add_argument("--no-shm", action="store_true", help="capture with XGetImage even if MIT-SHM exists")
    p.add_argument("--process-limit", type=int, default=0, metavar="N",
                   help="at most N processes at once for each --no-display-for account (a fork bomb stops there)")
    p.add_argument("--episode-cgroup", nargs="?", const=str(EPISODE_UNIT_CGROUP), default="", metavar="DIR",
                   help="run the --no-display-for accounts' commands in this cgroup (default: the one of "
                        "weavegym-episode.service), which caps them; without it --process-limit is RLIMIT_NPROC")
    p.add_argument("--x-lock-timeout", type=float, default=LOCK_TIMEOUT_S, metavar="SECONDS",
                   help="how long a call waits for the X connection while another call holds it")
    p.add_argument("--guard-state", default="", metavar="FILE",
                   help="keep the desktop guard's arm state and crossings in this root-only file too, so a "
                        "restarted agent goes on guarding (the image passes /run/weavegym/x-guard.json)")
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    def reread_token() -> str:
        return read_token_file(FW_CFG_TOKEN if args.token_fwcfg else args.token_file)

    def reread_tls() -> TlsIdentity:
        return read_identity_file(FW_CFG_IDENTITY if args.tls_fwcfg else args.tls_file)

    try:
        token = read_fwcfg_token() if args.token_fwcfg else read_token_file(args.token_file)
        tls = (read_fwcfg_identity() if args.tls_fwcfg
               else read_identity_file(args.tls_file) if args.tls_file else None)
    except (OSError, ValueError) as exc:
        print(f"weavegym-agent: cannot read the token or the TLS identity: {exc}", file=sys.stderr)
        return 2
    procs = episode_cgroup(Path(args.episode_cgroup)) if args.episode_cgroup else None
    config = AgentConfig(display=args.display, listen=args.listen, token=token, python=args.python,
                         use_shm=not args.no_shm, x_lock_timeout_s=args.x_lock_timeout,
                         process_limit=args.process_limit, episode_cgroup=procs or "", tls=tls,
                         reread_token=reread_token, reread_tls=reread_tls if tls is not None else None,
                         no_display_users=frozenset(u for u in args.no_display_for.split(",") if u),
                         guard_state=args.guard_state)
    server, servicer, port = build_server(config)
    relay = None
    if args.vsock_port:
        try:
            relay = Relay(vsock_listener(args.vsock_port), tcp_connector("127.0.0.1", port), "vsock-relay").start()
        except OSError as exc:  # no vsock device in this guest: TCP keeps working
            logging.getLogger("weavegym.guest_agent").warning("vsock port %d unavailable: %s", args.vsock_port, exc)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(json.dumps({"event": "listening", "port": port, "listen": args.listen, "version": AGENT_VERSION}),
          flush=True)
    stop.wait()
    if relay is not None:
        relay.stop()
    server.stop(grace=2).wait()
    servicer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
