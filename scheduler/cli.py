"""The ``dra-scheduler`` command line (ARCHITECTURE §3.1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler.logging import configure_logging


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dra-scheduler", description="DRA-, topology- and gang-aware scheduler")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="schedule, offline, the objects found in PATH (YAML files or directories)")
    sim.add_argument("paths", nargs="+", metavar="PATH")
    sim.add_argument("--config", help="KubeSchedulerConfiguration file (or a ConfigMap manifest holding one)")
    sim.add_argument("-o", "--output", choices=["json", "table"], default="table")
    sim.add_argument("-v", "--verbose", action="store_true", help="log scheduling decisions to stderr")
    chk = sub.add_parser("check-config", help="validate a scheduler configuration file")
    chk.add_argument("file")
    run = sub.add_parser("run", help="schedule pods on a live cluster")
    run.add_argument("--kubeconfig")
    run.add_argument("--config")
    run.add_argument("--config-map")
    run.add_argument("--leader-elect", action="store_true")
    run.add_argument("--metrics-port", type=int, default=10259, help="port of /healthz, /readyz, /metrics")
    run.add_argument("--metrics-bind-address", default="0.0.0.0", help="address of /healthz, /readyz, /metrics")
    run.add_argument("--qps", type=float, default=200.0, help="client-side API request rate limit (<= 0: none)")
    run.add_argument("--burst", type=int, default=400, help="client-side API request burst")
    run.add_argument("--lease-name", default="dra-scheduler", help="Lease used for leader election")
    run.add_argument("--lease-namespace", default="kube-system", help="namespace of the leader-election Lease")
    run.add_argument(
        "--no-podgroup-controller",
        action="store_true",
        help="do not write scheduling.x-k8s.io PodGroup status (another controller does)",
    )
    args = parser.parse_args(argv)

    if args.command == "check-config":
        from scheduler.checkconfig import check_config

        code, text = check_config(args.file)
        print(text, file=sys.stdout if code == 0 else sys.stderr)
        return code

    if args.command == "simulate":
        configure_logging(verbose=args.verbose)
        from scheduler.config import ConfigError, load_config_file
        from scheduler.simulate import InputError, run_simulation, to_json, to_table

        try:
            config = load_config_file(args.config) if args.config else None
            result = run_simulation(args.paths, config)
        except ConfigError as e:
            print("invalid configuration:\n" + "\n".join(e.errors), file=sys.stderr)
            return 1
        except InputError as e:
            print(f"invalid input: {e}", file=sys.stderr)
            return 1
        print(to_json(result) if args.output == "json" else to_table(result))
        return 0

    configure_logging(verbose=True)
    import asyncio

    from scheduler.run import RunOptions, run_scheduler

    opts = RunOptions(
        kubeconfig=args.kubeconfig,
        config=args.config,
        config_map=args.config_map,
        leader_elect=args.leader_elect,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_bind_address,
        qps=args.qps,
        burst=args.burst,
        podgroup_controller=not args.no_podgroup_controller,
    )
    if args.config and args.config_map:
        print("use --config or --config-map, not both", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run_scheduler(opts))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
