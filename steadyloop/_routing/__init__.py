"""Routing: which endpoint a model turn tries, and what a failed attempt leads to.

Guarantees: endpoints are named, never carried as URLs or keys in history (`endpoints`);
a route plan orders the candidates deterministically (`route_plan`); transports report
facts, not decisions, as one model of a failed attempt (`taxonomy`, read from httpx by
`transport_errors` and from error bodies by `provider_errors`), and one table turns it
into retry, traverse or stop (`disposition`), the only retry decider of a model call;
each endpoint has a circuit breaker over workflow time (`circuit_breaker`) whose state
is shared by every run (`endpoint_health`); what a provider accepts (`provider_profiles`)
and what a call cost (`pricing`) are named per endpoint.

Not guaranteed: that a provider's answer is true; only that its failure is classified and
bounded. Pure: nothing in this package imports temporalio.
"""
