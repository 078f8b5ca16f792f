"""Host side of weavegym: the guest client, host tooling and (later) backends and the Gymnasium env."""
