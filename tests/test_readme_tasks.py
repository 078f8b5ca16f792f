"""README's task table is the list a new user reads first: it must name every registered task, and only those."""

from __future__ import annotations

import re
from pathlib import Path

from weavegym.envs.tasks import all_tasks

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_task_table_lists_every_registered_task_with_its_image() -> None:
    rows = dict(re.findall(r"^\| `(Weave-[A-Za-z]+-\d+)` \| [^|]+ \| (base|full) \|", README.read_text(), re.M))
    registered = {task.id: task.profile for task in all_tasks()}
    assert rows == registered, {"missing from README": sorted(set(registered) - set(rows)),
                                "not registered": sorted(set(rows) - set(registered)),
                                "wrong image": sorted(t for t in set(rows) & set(registered)
                                                      if rows[t] != registered[t])}
