"""The declaration in force: the tenants file read without refusing it, each tenant's last
good declaration standing in for what the file gets wrong (rules.py pure, in_force.py
reads, records.py the ledger's last good declarations, defs.py the misdeclaration checks)."""
