# The package's version: libhbm's (hbm_version(), CMakeLists.txt's project VERSION);
# tests/python checks that they agree.
__version__ = "0.1.0"
