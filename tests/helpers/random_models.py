"""Random rigid-body data and random tree topologies for tests (numpy only, independent of jaxsoa).

Import as ``from tests.helpers.random_models import ...``.

API:
    random_rotation(rng) -> (3, 3) rotation matrix, uniform on SO(3)
    random_inertia(rng) -> (mass, com (3,), inertia_com (3, 3)), a physically valid rigid body
    random_parent(rng, n) -> (parent (n,) in storage order, perm (n,)): a random tree whose
        topological link t is stored at index perm[t] (so parent[k] < k need not hold)
"""

import numpy as np


def random_rotation(rng) -> np.ndarray:
    """Uniform random rotation matrix of a normalised Gaussian quaternion (w, x, y, z)."""
    quaternion = rng.normal(size=4)
    w, x, y, z = quaternion / np.linalg.norm(quaternion)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def random_inertia(rng):
    """(mass, com (3,), inertia_com (3, 3)) of a physically valid rigid body: principal moments
    from positive second moments s_i (I_x = m (s_y + s_z), ...), so the triangle inequality holds
    strictly, rotated to random principal axes."""
    mass = rng.uniform(0.2, 3.0)
    s = rng.uniform(0.002, 0.05, 3)
    principal = mass * np.array([s[1] + s[2], s[0] + s[2], s[0] + s[1]])
    R = random_rotation(rng)
    inertia = R @ np.diag(principal) @ R.T
    return mass, rng.normal(0.0, 0.15, 3), 0.5 * (inertia + inertia.T)


def random_parent(rng, n):
    """A random tree in random storage order: (parent in storage order, topological -> storage map)."""
    topo_parent = [-1] + [int(rng.integers(0, k)) for k in range(1, n)]
    perm = rng.permutation(n)                        # topological link t is stored at perm[t]
    parent = np.empty(n, np.int64)
    for t, pt in enumerate(topo_parent):
        parent[perm[t]] = -1 if pt < 0 else perm[pt]
    return parent, perm
