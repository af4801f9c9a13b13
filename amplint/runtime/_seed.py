"""Seeding every random number generator a training run draws from, in one call.

Reproducibility bugs usually come from the generator nobody seeded: Python's ``random``
in a data augmentation, NumPy in a sampler, or an accelerator's generator.
"""

from __future__ import annotations

import operator
import random

from amplint.runtime._torch import needs_torch

__all__ = ["seed_all"]


@needs_torch
def seed_all(seed: int) -> None:
    """Seed ``random``, NumPy (when installed) and torch on every device with ``seed``.

    ``seed`` must be in ``[0, 2**32)``, the range every one of these accepts.
    ``torch.manual_seed`` seeds all devices; ``torch.cuda.manual_seed_all`` is also
    called when CUDA is present, for torch builds that only queue it lazily.
    """
    import torch

    seed = operator.index(seed)
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        pass
    else:
        numpy.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
