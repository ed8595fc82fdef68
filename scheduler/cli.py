"""The ``dra-scheduler`` command line (ARCHITECTURE §3.1).

``run`` takes kube-scheduler's flag names where they exist (``--kubeconfig``, ``--leader-elect*`` with
component-base's defaults and Go duration values, ``--version``); ``--context`` and the kubeconfig loading
rules are kubectl's. Exit codes: 0 ok, 1 failed (invalid configuration or input, no cluster configured or
reachable, lease lost), 2 usage error, 3 ``simulate --fail-on-pending`` with pods left pending, 130 SIGINT.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from scheduler.api.goduration import parse_go_duration
from scheduler.config.logging import FORMATS, LEVELS, configure_logging
from scheduler.config.registry import RegistryError

if TYPE_CHECKING:
    import asyncio

    from scheduler.kube.run import RunOptions, SchedulerApp

KUBERNETES_VERSION = "v1.37.2"  # the kube-scheduler / API version whose semantics this scheduler follows
PACKAGE = "dra-scheduler"

SIMULATE_EPILOG = """exit codes: 0 done (pending pods are reported, not an error), 1 invalid input or
configuration, 2 usage error, 3 with --fail-on-pending: at least one pod of the configured profiles stayed
pending. Pods whose spec.schedulerName is not a profile of the configuration are left alone and reported
as "left to scheduler NAME"."""

RUN_EPILOG = """cluster connection as kubectl: --kubeconfig, else $KUBECONFIG (':'-separated, merged: the
first file naming a cluster/user/context wins, current-context from the first file setting it), else
~/.kube/config, else the in-cluster service account. Leader-election settings may also come from the
configuration file's leaderElection block; flags given explicitly win. Exit codes: 0 stopped (SIGTERM),
1 failed (no cluster configured or reachable, invalid configuration, lease lost), 2 usage error."""


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def version_text() -> str:
    return (
        f"{PACKAGE} {package_version()} (Kubernetes {KUBERNETES_VERSION}: kube-scheduler semantics, "
        "kubescheduler.config.k8s.io/v1, resource.k8s.io/v1)"
    )


def go_duration(text: str) -> float:
    """argparse type: a Go duration (``15s``, ``1m30s``, ``500ms``; pflag's DurationVar), in seconds."""
    try:
        seconds = parse_go_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds != seconds or abs(seconds) > 1e9:
        raise argparse.ArgumentTypeError(f"time: invalid duration {text!r}")
    return seconds


def parse_bool(text: str) -> bool:
    """argparse type: Go's strconv.ParseBool (``--leader-elect=false``)."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r}")


class _Version(argparse.Action):
    """``--version``: one unwrapped line on stdout, exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_text())
        parser.exit(0)


def _log_flags(p: argparse.ArgumentParser, level: str, fmt: str) -> None:
    p.add_argument(
        "--log-level", choices=list(LEVELS), default=None, help=f"least severe level logged (default {level})"
    )
    p.add_argument(
        "--log-format", choices=list(FORMATS), default=fmt, help=f"log line format on stderr (default {fmt})"
    )


# --leader-elect* flag dest -> RunOptions field; the default is used when the flag is absent
LEADER_ELECT_FLAGS = {
    "leader_elect": ("leader_elect", False),
    "leader_elect_lease_duration": ("lease_duration", 15.0),
    "leader_elect_renew_deadline": ("renew_deadline", 10.0),
    "leader_elect_retry_period": ("retry_period", 2.0),
    "leader_elect_resource_lock": ("resource_lock", "leases"),
    "leader_elect_resource_name": ("lease_name", "dra-scheduler"),
    "leader_elect_resource_namespace": ("lease_namespace", "kube-system"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dra-scheduler", description="DRA-, topology- and gang-aware scheduler")
    parser.add_argument("--version", action=_Version, help="print the version and the Kubernetes version targeted")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate",
        help="schedule, offline, the objects found in PATH (YAML files or directories)",
        epilog=SIMULATE_EPILOG,
    )
    sim.add_argument("paths", nargs="+", metavar="PATH")
    sim.add_argument("--config", help="KubeSchedulerConfiguration file (or a ConfigMap manifest holding one)")
    sim.add_argument("-o", "--output", choices=["json", "table"], default="table")
    sim.add_argument("-v", "--verbose", action="store_true", help="log scheduling decisions to stderr")
    sim.add_argument(
        "--fail-on-pending",
        action="store_true",
        help="exit with code 3 when a pod of the configured profiles stays pending (for CI)",
    )
    sim.add_argument(
        "--controllers",
        action="store_true",
        help="create the pods of Deployments and Jobs as kube-controller-manager would, and schedule them "
        "(default: those kinds are skipped with a note)",
    )
    sim.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (default: a bar on a terminal, a line every 5 s otherwise, after 2 s)",
    )
    _log_flags(sim, "warning; info with -v", "json")
    chk = sub.add_parser("check-config", help="validate a scheduler configuration file")
    chk.add_argument("file")

    run = sub.add_parser("run", help="schedule pods on a live cluster", epilog=RUN_EPILOG)
    run.add_argument("--version", action=_Version, help="print the version and the Kubernetes version targeted")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    run.add_argument("--context", help="kubeconfig context to use (default: its current-context)")
    run.add_argument(
        "--connect-timeout",
        type=go_duration,
        default=60.0,
        metavar="DURATION",
        help="give up (exit 1) when the API server does not answer within this long at start-up; 0 = never "
        "(default 60s)",
    )
    run.add_argument("--config", help="KubeSchedulerConfiguration file (reloaded when it changes)")
    run.add_argument("--config-map", help="NAMESPACE/NAME of a ConfigMap holding scheduler-config.yaml (watched)")
    run.add_argument("--metrics-port", type=int, default=10259, help="port of /healthz, /readyz, /metrics")
    run.add_argument("--metrics-bind-address", default="0.0.0.0", help="address of /healthz, /readyz, /metrics")
    run.add_argument("--qps", type=float, default=200.0, help="client-side API request rate limit (<= 0: none)")
    run.add_argument("--burst", type=int, default=400, help="client-side API request burst")
    run.add_argument(
        "--max-inflight",
        type=int,
        default=256,
        help="API requests in flight at once, one HTTP/1.1 connection each; watches excepted (<= 0: no limit)",
    )
    le = run.add_argument_group("leader election (kube-scheduler's flags and defaults)")
    le.add_argument(
        "--leader-elect",
        nargs="?",
        const=True,
        default=None,
        type=parse_bool,
        metavar="BOOL",
        help="take the Lease before scheduling; for replicated schedulers (default false)",
    )
    le.add_argument(
        "--leader-elect-lease-duration",
        type=go_duration,
        metavar="DURATION",
        help="how long standbys wait after the last renewal before taking over (default 15s)",
    )
    le.add_argument(
        "--leader-elect-renew-deadline",
        type=go_duration,
        metavar="DURATION",
        help="how long the leader retries renewing before it gives up leading; < lease duration (default 10s)",
    )
    le.add_argument(
        "--leader-elect-retry-period",
        type=go_duration,
        metavar="DURATION",
        help="time between acquire/renew attempts; renew deadline > 1.2 x retry period (default 2s)",
    )
    le.add_argument("--leader-elect-resource-lock", choices=["leases"], help="lock object type (only leases)")
    le.add_argument("--leader-elect-resource-name", "--lease-name", help="name of the Lease (default dra-scheduler)")
    le.add_argument(
        "--leader-elect-resource-namespace",
        "--lease-namespace",
        help="namespace of the Lease (default kube-system)",
    )
    run.add_argument(
        "--no-podgroup-controller",
        action="store_true",
        help="do not write scheduling.x-k8s.io PodGroup status (another controller does)",
    )
    _log_flags(run, "info", "json")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = _command(parser, args)
    except RegistryError as e:  # no plugin registry installed (scheduler/config/registry.py)
        print(f"dra-scheduler: {e}", file=sys.stderr)
        return 2
    if argv is None and args.command == "simulate":
        # The process's own run (not a caller's): a simulation leaves millions of objects, and freeing them one
        # by one at exit takes seconds (1.5 s for 1,000 nodes and 6,500 pods). The output is written: leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "check-config":
        from scheduler.config.checkconfig import check_config

        code, text = check_config(args.file)
        print(text, file=sys.stdout if code == 0 else sys.stderr)
        return code

    if args.command == "simulate":
        return _simulate(args)
    return _run(parser, args)


def _simulate(args: argparse.Namespace) -> int:
    configure_logging(level=args.log_level or ("info" if args.verbose else "warning"), fmt=args.log_format)
    from scheduler.config.schedulerconfig import ConfigError, load_config_file
    from scheduler.simulate.progress import LINE_INTERVAL, Progress, reporting
    from scheduler.simulate.report import pending_exit_code
    from scheduler.simulate.simulation import InputError, run_simulation, to_json, to_table

    # with --log-format json (the default) the progress lines are JSON records too: stderr stays JSON lines
    reporter = None if args.no_progress else Progress(sys.stderr, json_lines=args.log_format == "json")
    if reporter is not None and args.verbose and reporter.tty:
        reporter.tty = False  # log lines and a redrawn bar on one terminal garble each other
        reporter.interval = LINE_INTERVAL
    try:
        with reporting(reporter):
            config = load_config_file(args.config) if args.config else None
            result = run_simulation(args.paths, config, controllers=args.controllers)
            if reporter is not None:
                s = result.summary
                reporter.finish(f"{s['scheduled']}/{s['pods']} pods scheduled, {s['unschedulable']} unschedulable")
    except ConfigError as e:
        print("invalid configuration:\n" + "\n".join(e.errors), file=sys.stderr)
        return 1
    except InputError as e:
        print(f"invalid input: {e}", file=sys.stderr)
        return 1
    print(to_json(result) if args.output == "json" else to_table(result))
    if args.fail_on_pending:
        code = pending_exit_code(result.summary)
        if code:
            s = result.summary
            print(f"--fail-on-pending: {s['unschedulable']} of {s['pods']} pod(s) stayed pending", file=sys.stderr)
        return code
    return 0


def run_options(args: argparse.Namespace) -> RunOptions:
    """RunOptions from the parsed flags (``explicit``: the leader-election flags given)."""
    from scheduler.kube.run import RunOptions

    opts = RunOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        connect_timeout=args.connect_timeout,
        config=args.config,
        config_map=args.config_map,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_bind_address,
        qps=args.qps,
        burst=args.burst,
        max_inflight=args.max_inflight,
        podgroup_controller=not args.no_podgroup_controller,
    )
    explicit: set[str] = set()
    for dest, (field, default) in LEADER_ELECT_FLAGS.items():
        v = getattr(args, dest)
        setattr(opts, field, default if v is None else v)
        if v is not None:
            explicit.add(field)
    opts.explicit = frozenset(explicit)
    return opts


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import gc

    # Importing the scheduler allocates only long-lived objects (modules, classes, the plugin registry): no
    # cyclic collection until tune_gc() (with CPython's thresholds the young and full passes during the imports
    # cost 30-40 ms of every start); the collector comes back on any early return too.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run_app(parser, args)
    finally:
        if enabled:
            gc.enable()


def _run_app(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from scheduler.kube.run import SchedulerApp, apply_leader_election

    if args.config and args.config_map:
        print("use --config or --config-map, not both", file=sys.stderr)
        return 2
    opts = run_options(args)
    if not args.config and not args.config_map:  # no file can change them: check the flags now
        errors = apply_leader_election(opts, None)
        if errors:
            parser.error("; ".join(errors))
    configure_logging(level=args.log_level or "info", fmt=args.log_format)
    import asyncio

    app = SchedulerApp(opts)
    tune_gc()
    raise_open_files_limit()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            code = runner.run(serve(app))
    except KeyboardInterrupt:
        return 130
    if app.fatal:
        print(f"dra-scheduler run: {app.fatal}", file=sys.stderr)
    return code


# The cyclic garbage collector's thresholds for ``run`` (CPython's defaults: 700, 10, 10). A live scheduler holds
# millions of container objects (the informers' raw objects, the typed cache) and allocates and frees many more
# per pod (watch events, cycle state, requests); with the defaults the collector ran a young collection every
# 700 net allocations and a full pass over the whole heap every few seconds: a third of the process's CPU for
# 1,000 pods on 200 nodes. Almost nothing the scheduler allocates forms reference cycles (refcounting frees
# it), so a young collection every 50,000 allocations loses nothing and costs a fraction.
GC_THRESHOLDS = (50_000, 20, 10)


def raise_open_files_limit() -> tuple[int, int] | None:
    """Raise the soft limit on open files to the hard limit, as Go's runtime does for every Go program since Go
    1.19, kube-scheduler among them (Go src/syscall/rlimit.go, go.dev/issue/46279). ``run`` holds one HTTP/1.1
    connection per request in flight (up to ``--max-inflight``, 256 by default, on the main and on the Events
    connection) plus one per watch; a 1,024 soft limit, common outside containers, would fail connections with
    EMFILE. Returns the (old, new) soft limit when it changed, None when it did not or cannot (no ``resource``
    module on Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return None  # an infinite hard limit cannot become the soft one on Linux (above fs.nr_open)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return None
    return soft, hard


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop for ``run`` when it is installed (a dependency on every platform but Windows), else
    the standard one. On the live path at QPS 5000 (1,000 pods, 200 nodes, e2e/throughput.py) uvloop with
    the lean HTTP client (scheduler.kube.http) cut the scheduler's CPU from 3.35 to 2.54 CPU-seconds (median
    of 3 rounds each); the client alone on the standard loop, to 3.26: the standard loop's TLS layer and
    callbacks are Python, uvloop's are C.

    ``DRA_SCHEDULER_EVENT_LOOP=asyncio`` chooses the standard loop anyway (``uvloop``, the default, uvloop when
    installed): for an operator comparing memory or behaviour between the two (uvloop's TLS layer is its own)."""
    choice = os.environ.get(EVENT_LOOP_ENV, "uvloop").strip().lower()
    if choice == "asyncio":
        return None
    if choice != "uvloop":
        raise SystemExit(f"{EVENT_LOOP_ENV}={choice!r}: choose uvloop or asyncio")
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


EVENT_LOOP_ENV = "DRA_SCHEDULER_EVENT_LOOP"


def tune_gc() -> None:
    """Set :data:`GC_THRESHOLDS` and move everything allocated so far (the imported modules, the plugin
    registry) out of the collector's reach: it lives as long as the process."""
    import gc

    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()
    gc.enable()


START_GC_PAUSE = 60.0  # s at most without cyclic collection while the informers apply their first lists


async def serve(app: SchedulerApp) -> int:
    """``app.run()``, with the cyclic collector paused until its informers have applied their first lists
    (at most :data:`START_GC_PAUSE` seconds), then ``gc.freeze()`` and the collector back on.

    The first lists allocate objects that stay (the cache, the informers' stores: 10,000 pending pods with their
    claims on 1,250 nodes are some 600,000 tracked objects): each full pass the growing heap triggered on the way
    re-walked all of them, about 0.5 CPU-s of the start (bench/bench_startup.py) for no garbage found. Frozen,
    they stay out of the collector's walks for the process's life. A start that takes longer than the pause
    (an API server that does not answer) collects as usual meanwhile."""
    import asyncio
    import gc

    async def synced() -> None:
        await app.started.wait()
        await app.informers.wait_synced()

    async def freeze_when_synced() -> None:
        try:
            try:
                await asyncio.wait_for(synced(), START_GC_PAUSE)
            except TimeoutError:
                gc.enable()
                await synced()
            gc.freeze()
        finally:
            gc.enable()

    gc.disable()
    task = asyncio.create_task(freeze_when_synced(), name="gc-freeze")
    try:
        return int(await app.run())
    finally:
        task.cancel()
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
