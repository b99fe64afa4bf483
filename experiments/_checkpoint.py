"""Checkpoints of an iterative optimisation (`experiments.trajopt`, `experiments.trajopt_tether`,
`experiments.train_controller`), so an interrupted run resumes instead of starting again.

`run_steps` runs an optimiser's steps (`descend`: an optax optimiser on a loss) and, every `every`
iterations, at the last one and at Ctrl-C, writes the decision variables and the optimiser's state
(pytrees of arrays), the iteration count, the loss history, other per-iteration histories and the
seconds spent to one ``.npz`` beside the command's JSON (`Checkpoint`; atomically, `save_npz`: a crash
keeps the previous checkpoint whole). A rerun with the same settings restores them and goes on from that
iteration; since the arrays round-trip exactly (their dtypes kept in ``.npz``) and each iteration
depends only on them and its index, it ends with the same result as an uninterrupted run.

The file holds the command's settings with the sources' fingerprint (`Record.settings`): a checkpoint
of other settings is refused (`SettingsMismatchError`, naming them) unless `overwrite`, which discards
it; one of the same settings is resumed, with `overwrite` too (``--overwrite`` replaces results of
*other* settings). The command removes the file (`Checkpoint.remove`) once its results are written.
"""

import json
import pathlib
import time
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments._common import SettingsMismatchError, differences, save_npz
from experiments._outputs import jsonable
from experiments._progress import progress

CHECKPOINT_EVERY = 10             # iterations between checkpoints (and one at the last iteration and at Ctrl-C)


def checkpoint_note(name, every=CHECKPOINT_EVERY):
    """`interruptible`'s line for a command checkpointing to `name`."""
    return (f"the optimisation's last finished iteration is saved in --out ({name}, every {every} iterations "
            "and at Ctrl-C); run the same command again to resume from it")


class Checkpoint:
    """The checkpoint file `path` of a run with `settings` (module doc): `restore` what it holds of
    these settings, `save` the state at an iteration, `remove` it once the run's results are written."""

    def __init__(self, path, settings: dict, overwrite=False):
        self.path, self.saved = pathlib.Path(path), None
        self.settings = json.loads(json.dumps(settings, default=jsonable))
        if not self.path.is_file():
            return
        try:
            with np.load(self.path) as data:
                saved = {key: data[key] for key in data.files}
            old = json.loads(str(saved["settings"]))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            saved, old = None, None
        if old == self.settings:
            self.saved = saved
        elif not overwrite:
            what = "; ".join(differences(old, self.settings)) if isinstance(old, dict) else "an unreadable file"
            raise SettingsMismatchError(f"{self.path} is a checkpoint of other settings ({what}): pass --overwrite "
                                        "to discard it, or choose another --out")

    def _tree(self, prefix, like):
        """The pytree saved under `prefix`, of the structure of `like` (the same settings and sources made it)."""
        leaves = [jnp.asarray(self.saved[f"{prefix}_{i}"]) for i in range(int(self.saved[f"{prefix}_leaves"]))]
        return jax.tree.unflatten(jax.tree.structure(like), leaves)

    def restore(self, params, opt_state):
        """(iteration, params, optimiser state, losses list, seconds spent) saved, or the start values
        (0, `params`, `opt_state`, [], 0.0) when nothing of these settings is saved. `params` and
        `opt_state` (pytrees) give the structure of the saved ones."""
        if self.saved is None:
            return 0, params, opt_state, [], 0.0
        s = self.saved
        return (int(s["iteration"]), self._tree("params", params), self._tree("state", opt_state),
                [float(x) for x in s["losses"]], float(s["seconds"]))

    def history(self, name) -> list:
        """The per-iteration history `name` saved (`save`'s keywords) as Python numbers, or [] if none."""
        key = f"history_{name}"
        return [] if self.saved is None or key not in self.saved else self.saved[key].tolist()

    def save(self, iteration, params, opt_state, losses, seconds, **histories):
        """Write the state after `iteration` iterations (atomically): `params` and `opt_state` (pytrees of
        arrays), the `losses` and other `histories` (name: sequence of numbers), the `seconds` spent."""
        trees = {name: jax.tree.leaves(tree) for name, tree in (("params", params), ("state", opt_state))}
        arrays = {f"{name}_{i}": np.asarray(x) for name, leaves in trees.items() for i, x in enumerate(leaves)}
        save_npz(self.path, settings=np.array(json.dumps(self.settings)), iteration=np.array(iteration),
                 losses=np.asarray(losses, np.float64), seconds=np.array(seconds),
                 **{f"{name}_leaves": np.array(len(leaves)) for name, leaves in trees.items()}, **arrays,
                 **{f"history_{name}": np.asarray(values) for name, values in histories.items()})

    def remove(self):
        self.path.unlink(missing_ok=True)


def run_steps(step, params, opt_state, iters, checkpoint=None, every=CHECKPOINT_EVERY, desc="descend",
              show_progress=True, histories=(), unit="iteration"):
    """Iterations i = 0 … `iters` − 1 of ``step(i, params, opt_state) -> (loss, params, opt_state, values)``
    (`values`: one number per name in `histories`), from the iteration saved in `checkpoint` where it holds
    one of these settings, saying so. Saves to `checkpoint` (None: no checkpoints) every `every`
    iterations, at the last one and on Ctrl-C (then re-raises); another exception keeps the last saved
    one. Returns (params, optimiser state, losses list, {name: list} of `histories`, seconds spent over
    every run)."""
    start, params, opt_state, losses, spent = (checkpoint.restore(params, opt_state) if checkpoint
                                               else (0, params, opt_state, [], 0.0))
    history = {name: checkpoint.history(name) if checkpoint else [] for name in histories}
    if start:
        print(f"{desc}: resuming from {unit} {start} of {iters} (checkpoint {checkpoint.path.name}, same settings)",
              flush=True)
    done, t0 = (start, params, opt_state), time.perf_counter()   # the last whole iteration, rebound in one step

    def save():
        iteration, p, state = done
        checkpoint.save(iteration, p, state, losses[:iteration], spent + time.perf_counter() - t0,
                        **{name: values[:iteration] for name, values in history.items()})

    try:
        for i in progress(range(start, iters), show_progress, desc=desc):
            loss, new_params, new_state, values = step(i, done[1], done[2])
            losses.append(float(loss))
            for name, value in zip(histories, values, strict=True):
                history[name].append(value)
            done = (i + 1, new_params, new_state)
            if checkpoint and ((i + 1) % every == 0 or i + 1 == iters):
                save()
    except KeyboardInterrupt:
        if checkpoint and done[0] > start:
            save()
        raise
    return done[1], done[2], losses, history, spent + time.perf_counter() - t0


def descend(loss_and_grad, params, optimizer, iters, checkpoint=None, every=CHECKPOINT_EVERY, desc="descend",
            show_progress=True):
    """`iters` steps of the optax `optimizer` from `params` (from the iteration saved in `checkpoint`
    where it holds one of these settings, saying so); ``loss_and_grad(params) -> (loss, grad)``.
    Saves to `checkpoint` (None: no checkpoints) every `every` iterations, at the last one and on
    Ctrl-C (then re-raises). Returns (params, losses (iters + 1,): one per step and the final one,
    seconds spent over every run)."""
    def step(i, params, opt_state):
        loss, grad = loss_and_grad(params)
        updates, opt_state = optimizer.update(grad, opt_state)
        return loss, optax.apply_updates(params, updates), opt_state, ()

    params, _, losses, _, seconds = run_steps(step, params, optimizer.init(params), iters, checkpoint, every, desc,
                                              show_progress)
    t0 = time.perf_counter()
    losses.append(float(loss_and_grad(params)[0]))
    return params, np.array(losses), seconds + time.perf_counter() - t0
