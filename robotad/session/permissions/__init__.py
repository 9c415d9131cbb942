"""Permission decisions: the enforcer (rules, modes, remembered consent), patterns, hazards,
sensitive paths (secrets, persistence, the workspace) and the auto-mode classifier. Plain
evaluation: nothing here performs I/O but the classifier's child."""
