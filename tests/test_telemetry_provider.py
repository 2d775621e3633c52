"""`gen_ai.provider.name` is a provider id, never a host: the conventions' id for a known
provider's API host, else the endpoint's configured name (`steadyloop.telemetry._model_spans`)."""

from __future__ import annotations

import pytest

from steadyloop._routing.endpoints import EndpointConfig
from steadyloop.telemetry._model_spans import provider_name


@pytest.mark.parametrize(
    ("base_url", "provider"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://API.OpenAI.com/v1", "openai"),
        ("https://api.anthropic.com/v1", "anthropic"),
        ("https://generativelanguage.googleapis.com/v1beta/openai", "gcp.gemini"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://api.mistral.ai/v1", "mistral_ai"),
        ("https://api.deepseek.com/v1", "deepseek"),
        ("https://api.x.ai/v1", "x_ai"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("https://my-resource.openai.azure.com/openai/v1", "azure.ai.openai"),
        ("https://us-central1-aiplatform.googleapis.com/v1/projects/p/openapi", "gcp.vertex_ai"),
        # Any other host: the endpoint's own name, whatever the address.
        ("http://127.0.0.1:8080/v1", "local-llama"),
        ("http://localhost:11434/v1", "local-llama"),
        ("https://gateway.internal.example.com/v1", "local-llama"),
        ("https://openai.com.evil.example/v1", "local-llama"),
    ],
)
def test_the_provider_is_a_known_id_or_the_endpoints_name(base_url: str, provider: str) -> None:
    assert provider_name(EndpointConfig(name="local-llama", base_url=base_url)) == provider
