"""SAR's graph partitioning (SAR, Mostafa 2022): METIS parts for domain-parallel full-batch training.

``metis`` needs ``pymetis``; it is imported from there, not here, so that
the rest of tierbench runs without it.
"""
