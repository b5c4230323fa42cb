"""Trajectory analyzers: finished trajectory in, episode/step skills out (see docs/DESIGN.md)."""

from opid_rllib.analyzer.base import Analyzer, Skills, StepRecord, TrajectoryRecord
from opid_rllib.analyzer.hindsight import HindsightAnalyzer
from opid_rllib.analyzer.openai_backend import OpenAIAnalyzer
from opid_rllib.analyzer.parsing import ParseError, parse_analysis
from opid_rllib.analyzer.pool import AnalyzerPool
from opid_rllib.analyzer.prompt import build_analysis_prompt, build_retry_prompt
from opid_rllib.analyzer.registry import ANALYZER_CHOICES, make_analyzer

__all__ = [
    "ANALYZER_CHOICES",
    "Analyzer",
    "AnalyzerPool",
    "HindsightAnalyzer",
    "OpenAIAnalyzer",
    "ParseError",
    "Skills",
    "StepRecord",
    "TrajectoryRecord",
    "build_analysis_prompt",
    "build_retry_prompt",
    "make_analyzer",
    "parse_analysis",
]
