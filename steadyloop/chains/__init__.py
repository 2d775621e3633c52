"""Chains: may a run start a child run, and whose chain is it.

Guarantees: a run's lineage names its chain's root, depth and path (`lineage`); the
configured limits (depth, chain budget, pair seen, pair cooldown, tenant rate, tenant
ceiling) become rules over measurements (`limits`) decided by one pure function
(`rules`); the built-in `delegate` tool reads its arguments and names the child it starts
(`delegation_tool`); `queries` and `search_attributes` name the chain's visibility
attributes, for listing and searching runs.

Not here: the workflow that admits a child (`steadyloop.workflows.delegation`). Only
`search_attributes` imports temporalio (it builds Temporal's typed keys); the rest is pure.
"""
