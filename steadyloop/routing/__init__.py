"""Routing: which endpoint a model turn tries, and what a failed attempt leads to.

Guarantees: endpoints are named, never carried as URLs or keys in history (`endpoints`);
a route plan orders the candidates deterministically (`route_plan`); transports report
facts, not decisions (`taxonomy`, `transport_errors`, `provider_errors`), and one table
turns those facts into retry, traverse or stop (`disposition`); each endpoint has a
circuit breaker over workflow time (`circuit_breaker`) whose state is shared by every run
(`endpoint_health`); what a provider accepts (`provider_profiles`) and what a call cost
(`pricing`) are named per endpoint.

Not guaranteed: that a provider's answer is true; only that its failure is classified and
bounded. Pure: nothing in this package imports temporalio.
"""
