"""The directory put on trials' ``PYTHONPATH`` so that ``import determined`` resolves to hpcdet.

Only ``hpcdet/shim`` goes on the path, never a top-level ``determined`` in site-packages: a
real Determined installation elsewhere stays untouched.
"""
