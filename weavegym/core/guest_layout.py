"""The guest image's accounts and folders, as the image provisions them (vm_images/guest_files/provision.sh).

They sit at the bottom layer because every layer above needs them: the backends start the shell as
the workspace account, the probes tell the two channels apart by owner, and task setups write into
the shared home.
"""

# The desktop account runs the X session and every GUI app; the workspace account runs the episode's
# shell and python actions and cannot reach X. Both share the home folder and the shared group, so a
# file's owner says which channel made it.
DESKTOP_USER = "user"
WORKSPACE_USER = "workspace"
SHARED_GROUP = "weave"
HOME = f"/home/{DESKTOP_USER}"
# Root-only state a task's GUI hands back to its checker (e.g. what a dialog returned). The agent's
# user cannot read or write it, and the forbidden-pattern rule flags code that mentions it.
PRIVATE_DIR = "/var/lib/weavegym/task"
# In the environment of everything launch_gui starts, so a backend without snapshots can stop it on reset.
LAUNCH_MARKER = "WEAVEGYM_TASK_LAUNCH=1"
