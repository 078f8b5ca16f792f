"""The task registry: every module under ``envs/tasks/<domain>/`` that defines ``TASK`` is a task.

Discovery imports the modules (plain data plus small hook functions, cheap to
import) and checks the ids are unique and follow ``Weave-<Domain>-<N>``. Drafts (``Task.draft``) are
discovered too, but only an exact id reaches them: the suite is the tasks that are not drafts.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from functools import cache

from weavegym.core.errors import TaskError
from weavegym.envs.task import DOMAINS, Task

__all__ = ["DOMAINS", "all_tasks", "draft_tasks", "get_task", "match_tasks"]


@cache
def _registry() -> dict[str, Task]:
    folders = {info.name for info in pkgutil.iter_modules(__path__) if info.ispkg}
    unknown = folders - {d.lower() for d in DOMAINS}
    if unknown:
        raise TaskError(f"task folders {sorted(unknown)} are not domains; the domains are {DOMAINS} "
                        "(weavegym/envs/task.py)")
    tasks: dict[str, Task] = {}
    for domain in DOMAINS:
        package = f"{__name__}.{domain.lower()}"
        try:
            pkg = importlib.import_module(package)
        except ModuleNotFoundError as exc:
            if exc.name == package:
                continue  # no tasks in this domain yet
            raise
        for info in pkgutil.iter_modules(pkg.__path__):
            module = importlib.import_module(f"{package}.{info.name}")
            task = getattr(module, "TASK", None)
            if not isinstance(task, Task):
                continue
            if task.domain != domain:
                raise TaskError(f"{module.__name__} defines {task.id} in domain {task.domain}, "
                                f"but lives under {domain.lower()}/")
            if task.id in tasks:
                raise TaskError(f"task id {task.id} is defined twice")
            tasks[task.id] = task
    return dict(sorted(tasks.items(), key=lambda kv: (DOMAINS.index(kv[1].domain), kv[1].number)))


def all_tasks() -> list[Task]:
    """The suite: every task that is not a draft, in domain order."""
    return [t for t in _registry().values() if not t.draft]


def draft_tasks() -> list[Task]:
    """Tasks still being proven (``Task.draft`` says why), in domain order."""
    return [t for t in _registry().values() if t.draft]


def get_task(task_id: str) -> Task:
    try:
        return _registry()[task_id]
    except KeyError:
        known = ", ".join(_registry()) or "none"
        raise TaskError(f"unknown task {task_id!r}; known tasks: {known}") from None


def match_tasks(patterns: str) -> list[Task]:
    """Tasks whose id matches a shell-style pattern such as ``Weave-*`` or ``Weave-DevOps-1``.

    Several comma-separated patterns ("Weave-Web-*,Weave-Data-2") select the union, each task
    once and in suite order, so a CLI user can name an exact set without a shell loop. A draft is
    selected only by its exact id (its author validating it), never by a wildcard.
    """
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    return [t for t in _registry().values()
            if (t.id in wanted if t.draft else any(fnmatch.fnmatchcase(t.id, p) for p in wanted))]
