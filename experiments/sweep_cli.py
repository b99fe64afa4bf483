"""The options of `python -m experiments sweep` (experiments/sweep.py) and its progress lines.

Every option is checked by argparse before any work: a bad value exits with status 2 and one line
naming the option (``python -m experiments sweep: error: argument --count: must be a positive
integer, got '-5' (see --help)``), never a traceback. Combinations (``--executor dask`` needs
``--scheduler``, the three multi-host options go together, ...) are checked right after parsing,
with the same one-line form.
"""

import argparse
import math
import re
import sys
import time

from tqdm import tqdm

from jaxsoa.workflows.executors import DaskExecutor, LocalExecutor

EXIT_NONFINITE = 3                   # completed, with non-finite outputs under --on-nonfinite fail


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (no usage block), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _integer(text, minimum, what):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def positive_int(text) -> int:
    return _integer(text, 1, "a positive integer")


def non_negative_int(text) -> int:
    return _integer(text, 0, "a non-negative integer")


def positive_float(text) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def host_port(text) -> str:
    """HOST:PORT with 1 <= PORT <= 65535."""
    match = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[^\s:/]+):(\d+)", text)
    if not match or not 1 <= int(match.group(2)) <= 65535:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT (port 1-65535), got {text!r}")
    return text


def scheduler_address(text) -> str:
    """A Dask scheduler address: [PROTOCOL://]HOST:PORT (tcp, tls, ucx, inproc, ws, wss)."""
    protocol, _, rest = text.rpartition("://")
    if protocol not in ("", "tcp", "tls", "ucx", "inproc", "ws", "wss"):
        raise argparse.ArgumentTypeError(f"must be [tcp://]HOST:PORT, got {text!r}")
    try:
        host_port(rest)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be [tcp://]HOST:PORT, got {text!r}") from None
    return text


def non_empty(text) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a non-empty path")
    return text


def parser(doc, systems) -> OneLineParser:
    """The sweep command's parser (module doc); ``systems`` the choices of --system."""
    p = OneLineParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=non_empty, default="outputs/sweep",
                   help="folder of the run directories and summary (default outputs/sweep)")
    p.add_argument("--system", nargs="+", default=["space_arm", "dual_arm"], choices=systems)
    p.add_argument("--count", type=positive_int, default=512, help="samples per system (default 512)")
    p.add_argument("--chunk", type=positive_int, default=256,
                   help="samples per compiled call and per committed chunk, rounded up to the devices (default 256)")
    p.add_argument("--steps", type=positive_int, default=200, help="RK4 steps per sample (default 200)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the sampled inputs (default 0)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run directories in --out: compute only the chunks not yet saved")
    p.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local: this process's devices (default); dask: tasks on the cluster at --scheduler")
    p.add_argument("--scheduler", type=scheduler_address, help="Dask scheduler address, tcp://HOST:PORT")
    p.add_argument("--on-nonfinite", choices=("report", "fail"), default="report",
                   help="NaN/inf outputs: report them (exit 0) or fail (exit 3); statistics always exclude them")
    p.add_argument("--progress-every", type=positive_float, default=30.0,
                   help="seconds between progress lines when stderr is not a terminal (default 30)")
    p.add_argument("--coordinator", type=host_port, help="multi-host: HOST:PORT of process 0 (jax.distributed)")
    p.add_argument("--num-processes", type=positive_int, help="multi-host: number of processes")
    p.add_argument("--process-id", type=non_negative_int, help="multi-host: this process's index")
    return p


def check_combinations(p: OneLineParser, args):
    """The options that depend on each other (p.error: exit 2, one line)."""
    if args.executor == "dask" and args.scheduler is None:
        p.error("argument --scheduler: required with --executor dask")
    if args.executor != "dask" and args.scheduler is not None:
        p.error("argument --scheduler: only with --executor dask")
    distributed = {"--coordinator": args.coordinator, "--num-processes": args.num_processes,
                   "--process-id": args.process_id}
    given = [flag for flag, value in distributed.items() if value is not None]
    if given and len(given) < 3:
        missing = [flag for flag in distributed if flag not in given]
        p.error(f"argument {missing[0]}: required with {given[0]} (multi-host runs need all three)")
    if given and args.process_id >= args.num_processes:
        p.error(f"argument --process-id: must be below --num-processes {args.num_processes}, got {args.process_id}")
    if given and args.executor == "dask":
        p.error("argument --executor: dask does not combine with the multi-host options")


def error_text(error: Exception) -> str:
    """An exception as one line: the message alone when it already names its path (the store's and
    the probe's errors), else ``str(error)``."""
    strerror, filename = getattr(error, "strerror", None), getattr(error, "filename", None)
    if strerror and filename is not None and str(filename) in strerror:
        return strerror
    return str(error) or type(error).__name__


def executor(args):
    """The chunk executor the options ask for."""
    return DaskExecutor(scheduler=args.scheduler) if args.executor == "dask" else LocalExecutor()


class Progress:
    """``on_chunk(done, total)`` callback: a tqdm bar when stderr is a terminal; otherwise one line
    at most every ``every`` seconds, and one at the end, so a captured log is never flooded."""

    def __init__(self, label, total, every=30.0, stream=None):
        self.label, self.total, self.every, self.stream = label, total, every, stream or sys.stderr
        self.bar = tqdm(total=total, desc=label, unit="sample", mininterval=1.0, file=self.stream) \
            if self.stream.isatty() else None
        self.last = time.monotonic()
        self.first = None                         # (samples, time) at the first commit: the rate leaves out compiling

    def __call__(self, done, total):
        now = time.monotonic()
        if self.first is None:
            self.first = (done, now)
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            return
        if now - self.last >= self.every or done >= total:
            rate = (done - self.first[0]) / max(now - self.first[1], 1e-9)
            speed = f", {rate:.3g} samples/s" if rate > 0 else ""
            eta = f", ETA {(total - done) / rate:.0f} s" if rate > 0 and done < total else ""
            print(f"{self.label}: {done}/{total} samples ({100 * done / total:.1f} %){speed}{eta}",
                  file=self.stream, flush=True)
            self.last = now

    def close(self):
        if self.bar is not None:
            self.bar.close()


def nonfinite_status(nonfinite: dict, policy: str, writer: bool = True) -> int:
    """Print the non-finite counts {system: {output: count}}; the exit status under ``policy``
    ("report": 0, "fail": 3 if any)."""
    found = [f"{system}/{name}: {count}" for system, counts in nonfinite.items() for name, count in counts.items()]
    if found and writer:
        print(f"non-finite samples (excluded from the statistics): {', '.join(found)}", file=sys.stderr)
    return EXIT_NONFINITE if found and policy == "fail" else 0
