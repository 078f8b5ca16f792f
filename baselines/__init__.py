"""Reference agents (random, noop, oracle, llm) that implement one small agent interface."""
