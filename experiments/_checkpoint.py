"""Checkpoints of an iterative optimisation (`experiments.trajopt`, `experiments.trajopt_tether`), so an
interrupted run resumes instead of starting again.

`descend` runs an optax optimiser and, every `every` iterations, at the last one and at Ctrl-C, writes
the decision variables, the optimiser's state, the iteration count, the loss history and the seconds
spent to one ``.npz`` beside the command's JSON (`Checkpoint`; atomically, `save_npz`: a crash keeps
the previous checkpoint whole). A rerun with the same settings restores them and goes on from that
iteration; since the arrays round-trip exactly (float64 and int32 in ``.npz``) and each iteration
depends only on them, it ends with the same result as an uninterrupted run.

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

from experiments._common import SettingsMismatchError, _jsonable, differences, progress, save_npz

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
        self.settings = json.loads(json.dumps(settings, default=_jsonable))
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

    def restore(self, params, opt_state):
        """(iteration, params, optimiser state, losses list, seconds spent) saved, or the start values
        (0, `params`, `opt_state`, [], 0.0) when nothing of these settings is saved."""
        if self.saved is None:
            return 0, params, opt_state, [], 0.0
        s = self.saved
        leaves = [jnp.asarray(s[f"state_{i}"]) for i in range(int(s["state_leaves"]))]
        opt_state = jax.tree.unflatten(jax.tree.structure(opt_state), leaves)
        return (int(s["iteration"]), jnp.asarray(s["params"]), opt_state, [float(x) for x in s["losses"]],
                float(s["seconds"]))

    def save(self, iteration, params, opt_state, losses, seconds):
        """Write the state after `iteration` iterations (atomically)."""
        leaves = jax.tree.leaves(opt_state)
        save_npz(self.path, settings=np.array(json.dumps(self.settings)), iteration=np.array(iteration),
                 params=np.asarray(params), losses=np.asarray(losses, np.float64), seconds=np.array(seconds),
                 state_leaves=np.array(len(leaves)), **{f"state_{i}": np.asarray(x) for i, x in enumerate(leaves)})

    def remove(self):
        self.path.unlink(missing_ok=True)


def descend(loss_and_grad, params, optimizer, iters, checkpoint=None, every=CHECKPOINT_EVERY, desc="descend",
            show_progress=True):
    """`iters` steps of the optax `optimizer` from `params` (from the iteration saved in `checkpoint`
    where it holds one of these settings, saying so); ``loss_and_grad(params) -> (loss, grad)``.
    Saves to `checkpoint` (None: no checkpoints) every `every` iterations, at the last one and on
    Ctrl-C (then re-raises). Returns (params, losses (iters + 1,): one per step and the final one,
    seconds spent over every run)."""
    opt_state = optimizer.init(params)
    start, params, opt_state, losses, spent = (checkpoint.restore(params, opt_state) if checkpoint
                                               else (0, params, opt_state, [], 0.0))
    if start:
        print(f"{desc}: resuming from iteration {start} of {iters} (checkpoint {checkpoint.path.name}, same settings)",
              flush=True)
    done, t0 = (start, params, opt_state), time.perf_counter()   # the last whole iteration, rebound in one step

    def save():
        iteration, p, state = done
        checkpoint.save(iteration, p, state, losses[:iteration], spent + time.perf_counter() - t0)

    try:
        for i in progress(range(start, iters), show_progress, desc=desc):
            loss, grad = loss_and_grad(done[1])
            updates, new_state = optimizer.update(grad, done[2])
            new_params = optax.apply_updates(done[1], updates)
            losses.append(float(loss))
            done = (i + 1, new_params, new_state)
            if checkpoint and ((i + 1) % every == 0 or i + 1 == iters):
                save()
    except KeyboardInterrupt:
        if checkpoint and done[0] > start:
            save()
        raise
    params = done[1]
    losses.append(float(loss_and_grad(params)[0]))
    return params, np.array(losses), spent + time.perf_counter() - t0
