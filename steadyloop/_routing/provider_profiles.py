"""One name for what a run's provider accepts: its transcript rules and its tool-schema rules.

A run names its provider's profile (`RunInput.provider_profile`); the workflow heals
the transcript for it before every model request (`validate_and_heal`) and asks the
describe-tools activity for schemas sanitized for it (`sanitize_tool_schema`).
`portable` (the default) is what every provider here accepts without strict mode.
"""

from __future__ import annotations

from typing import Literal

from steadyloop._history.healing import TRANSCRIPT_PROFILES, TranscriptProfile, TranscriptRules
from steadyloop.tools._schema_profiles import SchemaProfile

ProviderProfile = Literal["portable", "openai", "openai_strict", "anthropic", "gemini", "mistral"]

_TRANSCRIPT: dict[ProviderProfile, TranscriptProfile] = {
    "portable": "portable",
    "openai": "openai",
    "openai_strict": "openai",  # strict mode constrains arguments, not the transcript
    "anthropic": "anthropic",
    "gemini": "gemini",
    "mistral": "mistral",
}


def transcript_rules(profile: ProviderProfile) -> TranscriptRules:
    return TRANSCRIPT_PROFILES[_TRANSCRIPT[profile]]


def schema_profile(profile: ProviderProfile) -> SchemaProfile:
    return profile
