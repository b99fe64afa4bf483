"""Progress of the experiments' commands: a tqdm bar on a terminal, and where stderr is captured (a log, a
pipe) one line at most every 30 s (`LineProgress`), so that a long run shows it is alive without flooding
the log; `advance`, a bar over simulated seconds."""

import sys
import time

from tqdm import tqdm

PROGRESS_EVERY = 30.0          # seconds between progress lines when stderr is not a terminal


class LineProgress:
    """What `progress` gives when stderr is not a terminal (a captured log, a pipe): the tqdm calls the
    commands use (iteration, ``with``, ``update``, ``n``, ``close``) printing one line
    ``desc: n/total (p %), elapsed s, ETA s`` at most every `every` seconds, and one at the end when any
    was printed and the count moved since the last, so a long run shows it is alive without flooding the log."""

    def __init__(self, iterable=None, total=None, desc="", every=PROGRESS_EVERY, stream=None, unit="it", **_):
        self.iterable, self.desc, self.every, self.unit = iterable, desc, every, unit
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.stream, self.n = stream or sys.stderr, 0
        self.start = self.last = time.monotonic()
        self.printed = self.closed = False
        self.printed_n = None                   # the count last printed: the closing line is not a repeat

    def line(self) -> str:
        """The progress line now."""
        elapsed = time.monotonic() - self.start
        if not self.total:
            return f"{self.desc}: {self.n:g} {self.unit}, {elapsed:.0f} s"
        eta = f", ETA {elapsed * (self.total - self.n) / self.n:.0f} s" if 0 < self.n < self.total else ""
        return f"{self.desc}: {self.n:g}/{self.total:g} {self.unit} ({100 * self.n / self.total:.0f} %), " \
               f"{elapsed:.0f} s{eta}"

    def update(self, n=1):
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every:
            print(self.line(), file=self.stream, flush=True)
            self.last, self.printed, self.printed_n = now, True, self.n

    def close(self):
        if self.printed and not self.closed and self.n != self.printed_n:
            print(self.line(), file=self.stream, flush=True)
        self.closed = True

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


def progress(iterable=None, enabled=True, every=PROGRESS_EVERY, **kwargs):
    """A tqdm bar on a terminal, redrawn at most once a second; when stderr is not a TTY (a captured
    log, a pipe, pytest) a `LineProgress` line at most every `every` seconds; nothing if `enabled` is false."""
    if enabled and not sys.stderr.isatty():
        return LineProgress(iterable, every=every, **kwargs)
    return tqdm(iterable, disable=None if enabled else True, mininterval=1.0, **kwargs)


def advance(t_end, step, desc):
    """Call ``t = step(t)`` from t = 0 until t ≥ t_end; returns the final t.

    The bar counts simulated seconds and ends at t_end exactly; it opens after the first call, so the
    compile time of that call does not enter its rate or ETA. One summary line is printed at the end
    (the only output where the bar is off)."""
    start = time.perf_counter()
    t = step(0.0)
    with progress(total=t_end, initial=min(t, t_end), desc=desc, unit="s", unit_scale=True) as bar:
        while t < t_end:
            t = step(t)
            bar.update(min(t, t_end) - bar.n)
    print(f"{desc}: {t:g} s simulated in {time.perf_counter() - start:.1f} s")
    return t
