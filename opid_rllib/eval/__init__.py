"""Evaluation on fixed panels in the deployment setting (no analyzer, no skills).

panel.py: panel/model/config setup, `evaluate` and the results files. The rollout loop (opid_rllib/play.py, a
GroupedTextEnvRunner, so prompts and projection are training's) and the paper's table (opid_rllib/paper_table.py,
pure functions) sit below the algorithm, which plays them too during training (opid_rllib/evaluation.py).
"""
