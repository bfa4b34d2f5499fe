"""The training bar names what it shows: the held-out AUC of the in-game attacker H as trained so
far, which is not the summary's in-game AUC (H refitted against the delivered state)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from tqdm import tqdm

from bngp.game.trainer import Game


def test_the_bar_labels_its_auc_as_the_attacker_before_its_final_refit() -> None:
    metrics = {"heldout_auc": 0.676, "heldout_utility_loss": 0.008, "attacker_at_prior": 0.0}
    game = SimpleNamespace(evaluate_heldout=lambda: metrics, history=SimpleNamespace(rows=[], collapse_events=0), step=3)
    writer = SimpleNamespace(add_scalar=lambda *args: None)
    bar = tqdm(total=10, file=io.StringIO())
    Game._record_evaluation(game, writer, {"loss": 0.1}, bar)
    text = str(bar)
    bar.close()
    assert "H auc before final refit=0.676" in text and "util=0.0080" in text
    assert " auc=" not in text
