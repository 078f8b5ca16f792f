"""The env: the task format and the tasks, actions and spaces, and ``WeaveEnv`` (Gymnasium's ``Env``)."""
