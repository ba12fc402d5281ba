"""Sesame from Python.

- ``schemes()``: every registered scheme and protocol, of every family;
- ``Index``: a keyword scheme's client and server half in process, with
  the meter snapshot of the last operation (``Index.meter()``);
- ``Profile``: a profile as the ``sesame`` CLI keeps it (create, open,
  add files, search, get), and its encrypted tables (``Profile.create_table``,
  ``Profile.table``: insert, import_file, query, explain, delete);
- ``sesame.ore.Scheme``: an ORE/OPE scheme (encrypt, compare, decrypt);
- ``sesame.range.Protocol``: a range protocol in process;
- ``sesame.bench.run(name, scale)``: a benchmark experiment's results.

Every error of the Rust code is a ``SesameError`` carrying its message.
"""

from ._sesame import Index, Profile, SesameError, Table, default_page_size, schemes
from . import bench, ore, range  # noqa: A004 - the family's name

__all__ = ["Index", "Profile", "SesameError", "Table", "bench", "default_page_size", "ore", "range", "schemes"]
