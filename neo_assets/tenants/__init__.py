"""The tenants file (tenants.yaml): its shape, its rules, and reading it."""
