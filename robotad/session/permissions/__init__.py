"""Permission decisions: the enforcer (rules, modes, remembered consent), patterns, hazards and
the auto-mode classifier. Plain evaluation: nothing here performs I/O but the classifier's child."""
