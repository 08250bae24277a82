"""Per-epoch progress of ``verbose`` training: a tqdm bar when tqdm is installed, else a line."""

from __future__ import annotations

import math
import sys
from typing import Any


class EpochProgress:
    """Called by the trainer after every epoch with its losses.

    Parameters
    ----------
    max_epochs : int
        The bar's total.
    """

    def __init__(self, max_epochs: int) -> None:
        self._bar: Any = None
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=max_epochs, unit="epoch", desc="lmtrain", file=sys.stderr)

    def __call__(self, epoch: int, training_loss: float, validation_loss: float,
                 seconds: float) -> None:
        validation = "" if math.isnan(validation_loss) else f", validation {validation_loss:.4e}"
        if self._bar is not None:
            postfix = {"loss": f"{training_loss:.4e}"}
            if validation:
                postfix["val"] = f"{validation_loss:.4e}"
            self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(1)
        else:
            print(f"epoch {epoch}: loss {training_loss:.6e}{validation} ({seconds:.2f} s)",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        """Ends the bar (a stopped run ends before its total)."""
        if self._bar is not None:
            self._bar.close()
