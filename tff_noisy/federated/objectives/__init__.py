"""Client objectives: one module per method family (``base``: cross-entropy and FedProx)."""
