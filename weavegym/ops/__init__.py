"""Operator tooling behind the CLI: doctor, gc, the KVM probe, benchmarks, validation and the suite report."""
