"""Rules: one module per rule; kb.rules.registry holds the table of them (`RULES`)."""
