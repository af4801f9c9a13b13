"""The warnings amplint.runtime raises while watching a training run.

They share one base class so that a run can be stopped on any of them
(``warnings.simplefilter("error", PrecisionWarning)``) or all of them silenced at once.
"""

from __future__ import annotations

__all__ = [
    "GradNormSpikeWarning",
    "LossScaleWarning",
    "NonFiniteWarning",
    "OverflowWarning",
    "PrecisionWarning",
]


class PrecisionWarning(UserWarning):
    """Base class of every warning about the numerical health of a mixed-precision run."""


class LossScaleWarning(PrecisionWarning):
    """The loss scale collapsed, or many consecutive steps were skipped for inf/NaN gradients."""


class OverflowWarning(PrecisionWarning):
    """float16 keeps overflowing: many skipped steps in the window, or a steadily falling scale."""


class NonFiniteWarning(PrecisionWarning):
    """The loss is inf or NaN, or inf/NaN gradients were applied (a step nothing skipped).

    Raised whatever the dtype: in bfloat16 and float32 no GradScaler skips the step, so
    this is the only sign that the parameters have just been corrupted.
    """


class GradNormSpikeWarning(PrecisionWarning):
    """The true gradient norm jumped far above its recent median."""
