"""Steps: pure diffs from facts to actions, and the scripts that carry the actions out (pure)."""

