"""The weavegym guest agent: a gRPC server that runs inside the guest next to its X display.

It depends only on grpcio, protobuf and python-xlib (Pillow optionally, for
JPEG), and imports nothing from the host side of weavegym, so it installs in a
minimal guest venv.
"""

AGENT_VERSION = "0.1.0"
PROTOCOL = "weavegym.agent.v1"
