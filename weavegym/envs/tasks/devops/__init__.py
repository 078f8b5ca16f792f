"""DevOps tasks: services diagnosed and fixed from the shell, with part of the control in a GUI."""
