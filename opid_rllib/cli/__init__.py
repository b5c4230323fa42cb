"""Console scripts: opid-train, opid-eval, opid-sft, opid-export."""
