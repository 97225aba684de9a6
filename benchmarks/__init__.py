# minigrad before NumPy, in every benchmark: importing it first lets it shorten how long
# OpenBLAS's idle threads spin (see minigrad/backend/host.py), as it does for a program that
# imports minigrad first.
import minigrad  # noqa: F401
