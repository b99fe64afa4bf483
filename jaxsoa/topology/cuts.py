"""Cut trees and loop closures from a topology with recorded cuts (docs/user_guide.md §6–7).

`jaxsoa.topology.configuration_parameters`'s builders record, for every link reached a second time, the cut
``(link_a, interface_a, link_b, interface_b, cut_type)``. Here: `cut_interfaces` turns the configuration
parameters into those of the cut tree (both ends of every cut made free ends), and `closure_from_topology`
builds the `jaxsoa.constraints.closure.LoopClosure` of the recorded cuts from the links' interface frames.
"""

import numpy as np

from jaxsoa.constraints.closure import loop_closure, stack_closures
from jaxsoa.topology.configuration_inputs import CUT_FIELDS, CUT_JOINT_TYPES


def cut_interfaces(interfaces, topology, xp=np):
    """Configuration parameters of the cut tree: ``interfaces (s, D)`` with both ends of every recorded
    cut set to 0 (a free end); padded cuts (−1) change nothing. numpy (xp=np) or traced (xp=jnp)."""
    s, D = interfaces.shape
    link, slot = xp.arange(s)[:, None, None], xp.arange(D)[None, :, None]
    ends = [tuple(xp.asarray(getattr(topology, f"cut_{f}_{x}")).astype(link.dtype) for f in ("link", "interface"))
            for x in "ab"]
    cut = [xp.any((link == k[None, None]) & (slot == m[None, None]), axis=-1) for k, m in ends]
    return xp.where(cut[0] | cut[1], xp.zeros_like(interfaces), interfaces)


def closure_from_topology(design, topology, dtype=None):
    """Host: the recorded cuts of ``topology`` (host or traced, padding −1 ignored) -> `LoopClosure`
    (n_cuts rows, in the topology's cut order), with the cut frames taken from ``design`` (a
    `jaxsoa.topology.reconfigure.LinkDesign`): link k's frame is its inboard interface's frame, so the cut frame
    on link a is ``inv(T[a, inboard(a)]) ∘ T[a, interface_a]`` (design-frame interface poses T), likewise
    on b; joint type and planarity from `CUT_JOINT_TYPES`; revolute cuts turn about the cut frames' z axis."""
    R, p = np.asarray(design.interface_rotation, np.float64), np.asarray(design.interface_translation, np.float64)
    inboard = np.asarray(topology.inboard_interface)
    a, ia, b, ib, code = (np.asarray(getattr(topology, f)) for f in CUT_FIELDS)
    closures = []
    for i in np.flatnonzero(a >= 0):
        frames = []
        for k, m in ((a[i], ia[i]), (b[i], ib[i])):
            if not 0 <= m < R.shape[1] or not 0 <= k < R.shape[0]:
                raise ValueError(f"cut {i}: storage index {k} interface {m} is not in the design ({R.shape[:2]})")
            R_in = R[k, inboard[k]]
            frames.append((R_in.T @ R[k, m], R_in.T @ (p[k, m] - p[k, inboard[k]])))   # inv(T_in) ∘ T_m
        cut_type, planar = CUT_JOINT_TYPES[int(code[i])]
        closures.append(loop_closure(int(a[i]), int(b[i]), *frames, cut_type, planar=planar, dtype=dtype,
                                     name=f"cut {i} (storage {a[i]}:{ia[i]} - storage {b[i]}:{ib[i]})"))
    if not closures:
        raise ValueError("the topology records no cut (n_cuts = 0): no LoopClosure to build")
    return stack_closures(*closures)
