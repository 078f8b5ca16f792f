"""The local harness: the guest agent on a host Xvfb display and a scripted LLM server, for tests and benchmarks."""
