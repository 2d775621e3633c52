"""Chains: may a run start a child run, and whose chain is it.

Guarantees: a run's lineage names its chain's root, depth and path (`lineage`); the
configured limits (depth, chain budget, pair seen, pair cooldown, tenant rate, tenant
ceiling) are each the bound half of a rule, paired with a measurement (`limits`) and
decided by one pure function (`rules`); the counts those rules read are authoritative,
kept by one admission ledger per tenant that records a child before it answers, so two
siblings can never both see the old count (`admission`, held by
`steadyloop._workflows.chain_admission`); the built-in `delegate` tool reads its arguments
and names the child it starts (`delegation_tool`);
`queries` and `search_attributes` name the chain's visibility attributes, for listing and
searching runs, not for counting.

Not here: the workflow that admits a child (`steadyloop._workflows.delegation`). Only
`search_attributes` imports temporalio (it builds Temporal's typed keys); the rest is pure.
"""
