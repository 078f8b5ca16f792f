"""Optional dependencies: which ``pip install 'weavegym[extra]'`` brings a missing module.

The core (the env, the spaces, the checkers) needs none of them; backends, the LLM baseline, reports and
Ray do. A module that needs one imports it through :func:`missing_extra`, so a user without it gets one
line naming the extra instead of a bare ``ModuleNotFoundError`` deep in a traceback.
"""

from __future__ import annotations

from weavegym.core.errors import HostSetupError

# top-level module -> (extra, what needs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "libvirt": ("libvirt", "the libvirt backend"),
    "libvirt_qemu": ("libvirt", "the libvirt backend"),
    "paramiko": ("ssh", "the ssh backend and remote libvirt"),
    "httpx": ("llm", "the llm baseline agent"),
    "jinja2": ("report", "HTML reports"),
    "imageio": ("report", "GIF/MP4 export"),
    "imageio_ffmpeg": ("report", "MP4 export"),
    "ray": ("ray", "RayVectorEnv"),
}


class MissingExtraError(HostSetupError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it.

    Also an ImportError, so code that probes for an optional module with ``except ImportError`` still works.
    """


def missing_extra(exc: ModuleNotFoundError) -> ImportError:
    """The error to raise for ``exc``: a MissingExtraError if an extra provides the module, else ``exc``."""
    top = (exc.name or "").split(".")[0]
    if top not in EXTRAS:
        return exc
    extra, purpose = EXTRAS[top]
    return MissingExtraError(f"{purpose} needs the Python module {top!r}: pip install 'weavegym[{extra}]'")
