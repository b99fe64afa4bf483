"""The batch-last rigid inertia (`jaxsoa.spatial.batch_last`: 10-lists [m; h; I_o]) against the 6×6
spatial algebra (`jaxsoa.spatial.algebra.transform_inertia` of `spatial_inertia`) and Pinocchio's
`Inertia.se3Action`, on random bodies, poses and a batch of them.

Tolerance 1e-12 absolute: O(1) masses, offsets and poses, a few 3×3 products (round-off ~1e-15); any sign,
transpose or index error is an O(0.01–1) difference.
"""

import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from jaxsoa.spatial import algebra
from jaxsoa.spatial import batch_last as sp
from tests.helpers.random_models import random_inertia, random_rotation

ATOL = 1e-12
SWAP = np.roll(np.eye(6), 3, axis=0)        # Pinocchio's [linear; angular] <-> our [angular; linear]


def _to_list(x, shape):
    """A (B, *shape) array as the batch-last list of its entries, each (B,)."""
    return list(np.moveaxis(np.asarray(x).reshape(len(x), -1), 0, 1)) if shape else [x]


def _matrix(list21):
    """(B, 6, 6) of a 21-list (each (B,))."""
    A, Bm, C = (np.stack([np.stack(row, -1) for row in block], -2) for block in sp.inertia_blocks(list21))
    return np.concatenate([np.concatenate([A, Bm], -1), np.concatenate([np.swapaxes(Bm, -1, -2), C], -1)], -2)


def _bodies(rng, count):
    mass, com, inertia_com = (np.stack(x) for x in zip(*(random_inertia(rng) for _ in range(count)), strict=True))
    return mass, com, inertia_com


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rigid_lists_round_trip_and_transform_like_6x6(seed):
    rng = np.random.default_rng(seed)
    mass, com, inertia_com = _bodies(rng, 5)
    R = np.stack([random_rotation(rng) for _ in range(5)])
    p = rng.normal(size=(5, 3))
    I_b = np.asarray(algebra.spatial_inertia(jnp.asarray(mass), jnp.asarray(com), jnp.asarray(inertia_com)))
    list21 = sp.spatial_inertia(jnp.asarray(mass), _to_list(com, (3,)), _to_list(inertia_com, (9,)))
    np.testing.assert_allclose(_matrix(list21), I_b, atol=ATOL)

    rigid = sp.rigid_inertia(list21)
    assert len(rigid) == 10
    np.testing.assert_allclose(np.asarray(rigid[0]), mass, atol=ATOL)
    np.testing.assert_allclose(np.stack(rigid[1:4], -1), mass[:, None] * com, atol=ATOL)   # h = m c
    np.testing.assert_allclose(_matrix(sp.rigid_to_inertia(rigid)), I_b, atol=ATOL)

    moved = sp.transform_rigid_inertia(_to_list(R, (9,)), _to_list(p, (3,)), rigid)
    expected = np.asarray(algebra.transform_inertia(jnp.asarray(R), jnp.asarray(p), jnp.asarray(I_b)))
    np.testing.assert_allclose(_matrix(sp.rigid_to_inertia(moved)), expected, atol=ATOL)


def test_transform_matches_pinocchio_and_composes():
    rng = np.random.default_rng(3)
    mass, com, inertia_com = _bodies(rng, 1)
    R1, R2 = random_rotation(rng), random_rotation(rng)
    p1, p2 = rng.normal(size=3), rng.normal(size=3)
    body = pin.Inertia(float(mass[0]), com[0], inertia_com[0])
    rigid = sp.rigid_inertia(sp.spatial_inertia(jnp.asarray(mass), _to_list(com, (3,)), _to_list(inertia_com, (9,))))

    moved = sp.transform_rigid_inertia(_to_list(R1[None], (9,)), _to_list(p1[None], (3,)), rigid)
    reference = SWAP @ body.se3Action(pin.SE3(R1, p1)).matrix() @ SWAP.T
    np.testing.assert_allclose(_matrix(sp.rigid_to_inertia(moved))[0], reference, atol=ATOL)

    twice = sp.transform_rigid_inertia(_to_list(R2[None], (9,)), _to_list(p2[None], (3,)), moved)
    once = sp.transform_rigid_inertia(_to_list((R2 @ R1)[None], (9,)), _to_list((R2 @ p1 + p2)[None], (3,)), rigid)
    np.testing.assert_allclose(np.stack(twice), np.stack(once), atol=ATOL)              # X_a_b X_b_c = X_a_c


def test_rigid_inertia_times_a_motion_is_the_6x6_product():
    rng = np.random.default_rng(4)
    mass, com, inertia_com = _bodies(rng, 6)
    x = rng.normal(size=(6, 6))
    list21 = sp.spatial_inertia(jnp.asarray(mass), _to_list(com, (3,)), _to_list(inertia_com, (9,)))
    product = np.stack(sp.rigid_inertia_vec(sp.rigid_inertia(list21), _to_list(x, (6,))), -1)
    np.testing.assert_allclose(product, np.einsum("bij,bj->bi", _matrix(list21), x), atol=ATOL)
    np.testing.assert_allclose(product, np.stack(sp.inertia_vec(list21, _to_list(x, (6,))), -1), atol=ATOL)
