"""The client objective interface (``base``: cross-entropy and FedProx); a method's own
objective lives in its folder, ``tff_noisy/methods/<name>/objective.py``."""
