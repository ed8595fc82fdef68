"""GpuTopology: interconnect-aware device choice, node scoring and gang domain preference
(graph.py: the per-node networkx model; scoring.py: best-subset tables; domains.py: cross-node domains;
plugin.py: the framework adapter)."""

from plugins.topology.plugin import NAME, SPEC, GpuTopology, parse_args, validate_args

__all__ = ["NAME", "SPEC", "GpuTopology", "parse_args", "validate_args"]
